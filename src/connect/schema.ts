import { z } from "zod";
import { jsonObject, required } from "../http/validation.ts";
import { CONNECTOR_SCOPES } from "./server.ts";

/** The consent of one-click connect: what the account holder is asked, and what they answer (src/connect/service.ts). */

export const consentHandleParam = z.object({
  handle: z
    .string()
    .min(1)
    .max(200)
    .meta({ description: "The consent's handle, from the dashboard's address after GET /oauth/authorize (works once, for 10 minutes)" }),
});

const connectorScope = z.enum(CONNECTOR_SCOPES, { error: `must be one of ${CONNECTOR_SCOPES.join(", ")}` });

export const Consent = z
  .object({
    client_name: z.string().meta({ description: "The name the client registered itself with (not verified: it names itself)" }),
    redirect_host: z.string().meta({ description: "Where the client's access will be sent: show it" }),
    redirect_is_loopback: z
      .boolean()
      .meta({ description: "true: to an app on the account holder's own computer (localhost); any local program could be listening" }),
    requested_scopes: z.array(connectorScope).meta({ description: "The scopes the client asked for (all of them when it named none)" }),
    scopes: z.array(connectorScope).meta({ description: "Every scope a connector key can be given; the account holder picks any of them" }),
  })
  .meta({
    id: "Consent",
    description: "An AI client's request to connect to /mcp for this account, awaiting the account holder's answer.",
  });
export type ConsentView = z.infer<typeof Consent>;

export const consentAnswerBody = z
  .strictObject(
    {
      allow: z.boolean({ error: required("boolean") }).meta({ description: "true: connect the client; false: refuse it" }),
      scopes: z
        .array(connectorScope, { error: required("array") })
        .min(1, { error: "must name at least one scope" })
        .transform((scopes) => CONNECTOR_SCOPES.filter((scope) => scopes.includes(scope)))
        .optional()
        .meta({ description: "What the connector key may read; the client's requested scopes when absent" }),
    },
    jsonObject,
  )
  .meta({ description: "The account holder's answer" });
export type ConsentAnswer = z.output<typeof consentAnswerBody>;

export const ConsentOutcome = z
  .object({
    redirect_to: z
      .string()
      .meta({ description: "Where to send the browser: the client's redirect URI with its code, or with access_denied" }),
    key_id: z.string().nullable().meta({
      description: "The connector key the grant acts as (listed by GET /api-keys, revoked by DELETE /api-keys/{id}); null when refused",
    }),
  })
  .meta({ id: "ConsentOutcome" });
export type ConsentOutcomeView = z.infer<typeof ConsentOutcome>;
