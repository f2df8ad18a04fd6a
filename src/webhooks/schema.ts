import { z } from "zod";
import { WEBHOOK_TEST_EVENT } from "../events/schema.ts";
import { jsonObject, required } from "../http/validation.ts";
import { prefixedId, timestamp } from "../http/wire.ts";
import { WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";
import { MAX_URL_LENGTH } from "./url-policy.ts";

/** The webhooks' wire shapes, declared once. */

/** min_change_pct: 0 to 1000 (a price can more than double), at most 2 decimals; stored as basis points. */
const minChangePct = z
  .number({ error: required("number") })
  .min(0, { error: "must be between 0 and 1000" })
  .max(1000, { error: "must be between 0 and 1000" })
  .refine((pct) => Math.abs(pct * 100 - Math.round(pct * 100)) < 1e-6, { error: "must have at most 2 decimals" })
  .transform((pct) => Math.round(pct * 100)) // basis points from here on
  .meta({ multipleOf: 0.01 });

/**
 * Where the URL may point (https://, a public host) depends on WEBHOOK_ALLOW_INSECURE_URLS, which no
 * static schema can know: src/webhooks/url-policy.ts checks that in the service, with the same 400.
 */
const webhookUrl = z
  .string({ error: required("string") })
  .trim()
  .meta({
    format: "uri",
    maxLength: MAX_URL_LENGTH,
    description: "https:// URL of a public host (no localhost, private or link-local addresses)",
    example: "https://example.com/hooks/prices",
  });

export const webhookBody = z.strictObject(
  {
    url: webhookUrl,
    events: z
      .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(", ")}` }), { error: required("array") })
      .min(1, { error: "must name at least one event type" })
      .transform((events) => WEBHOOK_EVENT_TYPES.filter((type) => events.includes(type)))
      .default([...WEBHOOK_EVENT_TYPES])
      .meta({ description: "The event types to receive; all by default" }),
    min_change_pct: minChangePct.default(0).meta({ description: "Only price changes of at least this many percent (0 to 1000, 2 decimals)", example: 5 }),
    description: z
      .string({ error: required("string") })
      .trim()
      .max(500, { error: "must be at most 500 characters" })
      .nullable()
      .default(null)
      .meta({ description: "A note for you, up to 500 characters after trimming (UTF-16 code units: an emoji counts twice)" }),
  },
  jsonObject,
);
export type WebhookBody = z.output<typeof webhookBody>;

export const webhookIdParam = z.object({ id: z.string().min(1).meta({ description: "The webhook's id (`whk_…`)", example: "whk_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }) });

export const Webhook = z
  .object({
    id: prefixedId("whk", "0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d"),
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
    min_change_pct: z.number().meta({ description: "A price change smaller than this (in %) is not sent" }),
    status: z.enum(["enabled", "disabled"]),
    created_at: timestamp,
    disabled_at: timestamp.nullable(),
    disabled_reason: z.string().nullable(),
  })
  .meta({ id: "Webhook", description: "A webhook as listed: never its secret." });
export type WebhookView = z.infer<typeof Webhook>;

export const CreatedWebhook = Webhook.extend({
  secret: z.string().regex(/^whsec_/).meta({ description: "The signing secret (Standard Webhooks): in this response only" }),
}).meta({ id: "CreatedWebhook" });

export const WebhookList = z.object({ webhooks: z.array(Webhook).meta({ description: "Newest first" }) }).meta({ id: "WebhookList" });

export const TestEventQueued = z
  .object({ event_id: z.string().regex(/^evt_/), type: z.string().meta({ example: WEBHOOK_TEST_EVENT }), status: z.literal("queued") })
  .meta({ id: "TestEventQueued" });

export const Delivery = z
  .object({
    event_id: z.string(),
    type: z.string(),
    attempt: z.int().min(1),
    status_code: z.int().nullable().meta({ description: "null when no response came (timeout, connection error)" }),
    error: z.string().nullable(),
    duration_ms: z.int(),
    outcome: z.enum(["delivered", "retrying", "failed", "disabled"]),
    delivered_at: timestamp,
  })
  .meta({ id: "Delivery", description: "One delivery attempt" });
export type DeliveryView = z.infer<typeof Delivery>;

export const DeliveryList = z
  .object({ webhook_id: z.string(), deliveries: z.array(Delivery).meta({ description: "The latest 100 attempts, newest first" }) })
  .meta({ id: "DeliveryList" });

