import { z } from "zod";
import { prefixedId, timestamp } from "../http/wire.ts";

/**
 * What happened to an account's keys and webhooks, declared once: the services build values of these
 * types, webhooks that subscribe receive them, GET /account/events lists them, and the OpenAPI document
 * lists them as webhooks. Every `data` names its account.
 */

const ACCOUNT_EVENT_TYPES = ["api_key.leaked", "api_key.expiring", "webhook.disabled", "usage.threshold"] as const;
export type AccountEventType = (typeof ACCOUNT_EVENT_TYPES)[number];

const keyId = prefixedId("key", "0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d");
const accountId = z.string().meta({ description: "The account the event belongs to" });
const keyFields = { account_id: accountId, key_id: keyId, prefix: z.string().meta({ example: "pda_live_Ab12Cd34" }) };

const event = <T extends AccountEventType, D extends z.ZodRawShape>(type: T, id: string, description: string, data: D) =>
  z.object({ type: z.literal(type), timestamp, data: z.object(data) }).meta({ id, description });

const ApiKeyLeakedEvent = event(
  "api_key.leaked",
  "ApiKeyLeakedEvent",
  "A secret scanner found the key in public; it was revoked before this was sent",
  {
    ...keyFields,
    name: z.string(),
    url: z.string().nullable().meta({ description: "Where it was found, as the scanner reported it" }),
    source: z.string().nullable().meta({ description: "What the scanner was reading (content, commit, gist, …)" }),
    revoked_at: timestamp,
  },
);

const ApiKeyExpiringEvent = event("api_key.expiring", "ApiKeyExpiringEvent", "The key expires in 7 days, or in 1 day", {
  ...keyFields,
  name: z.string(),
  expires_at: timestamp,
  days_left: z.union([z.literal(7), z.literal(1)]),
});

const WebhookDisabledEvent = event("webhook.disabled", "WebhookDisabledEvent", "A webhook stopped receiving events, and why", {
  account_id: accountId,
  webhook_id: prefixedId("whk", "0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d"),
  url: z.string(),
  disabled_reason: z.string(),
});

const UsageThresholdEvent = event("usage.threshold", "UsageThresholdEvent", "A key used 80 % or 100 % of its day quota (once each a day)", {
  ...keyFields,
  period: z.literal("day"),
  limit: z.int(),
  used: z.int(),
  threshold: z.union([z.literal(80), z.literal(100)]),
});

const ACCOUNT_EVENTS = [ApiKeyLeakedEvent, ApiKeyExpiringEvent, WebhookDisabledEvent, UsageThresholdEvent] as const;
type Payload = z.infer<(typeof ACCOUNT_EVENTS)[number]>;
export type AccountEventData<T extends AccountEventType> = Extract<Payload, { type: T }>["data"];
