import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { rotateWebhookSecret } from "../rotation.ts";
import { CreatedWebhook, rotateSecretBody, webhookIdParam } from "../schema.ts";
import { common } from "./common.ts";

const rotateWebhookSecretRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/{id}/rotate-secret",
    operationId: "rotateWebhookSecret",
    summary: "Replace the signing secret",
    description:
      "The new secret is in this response only. During the grace (grace_seconds, default 86400, at most 604800) each delivery carries " +
      "two signatures in webhook-signature, new then old (`v1,<new> v1,<old>`), so receivers can switch secrets without missing one. " +
      "Concurrent calls take effect one after another: a call that lost the race answers 409 and changes nothing. An MCP events " +
      "subscription (source mcp) answers 409: its secret is its client's, replaced when the client subscribes again with a new one.",
    request: {
      params: webhookIdParam,
      query: noQuery,
      body: jsonBody(rotateSecretBody, "The grace during which the previous secret still signs"),
    },
    errors: { notFound: true, conflict: true },
    responses: { 200: jsonResponse("The webhook, with its new signing secret", CreatedWebhook, ["Cache-Control"]) },
  }),
);

export const registerRotateWebhookSecret = (app: OpenApiApp) =>
  app.openapi(rotateWebhookSecretRoute, async (c) => {
    const webhook = { accountId: c.var.account.id, id: c.req.valid("param").id };
    const rotated = await rotateWebhookSecret(c.var.services, { ...webhook, graceSeconds: c.req.valid("json").grace_seconds });
    return c.json(rotated, 200, { "Cache-Control": "no-store" });
  });
