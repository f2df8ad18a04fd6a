import { z } from "zod";
import { feedEventId } from "../events/schema.ts";
import { prefixedId, timestamp } from "../http/wire.ts";
import type { AccountEventType } from "../platform/tables.ts";

/**
 * What happened to an account's keys and webhooks, declared once: the services build values of these
 * types, webhooks that subscribe receive them, GET /account/events lists them, and the OpenAPI document
 * lists them as webhooks. Every `data` names its account.
 */

const keyId = prefixedId("key", "0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d");
const accountId = z.string().meta({ description: "The account the event belongs to" });
const keyFields = { account_id: accountId, key_id: keyId, prefix: z.string().meta({ example: "pda_live_Ab12Cd34" }) };

/** An account event's payload (`id`: its component, `<id>Data` its data's) and, for the feeds, the same with the event's id. */
const event = <T extends AccountEventType, D extends z.ZodRawShape>(type: T, id: string, description: string, data: D) => {
  const fields = { type: z.literal(type), timestamp, data: z.object(data).meta({ id: `${id}Data` }) };
  return [
    z.object(fields).meta({ id, description }),
    z.object({ ...feedEventId, ...fields }).meta({ id: id.replace(/Event$/, "FeedEvent"), description }),
  ] as const;
};

const [ApiKeyLeakedEvent, ApiKeyLeakedFeedEvent] = event(
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

const [ApiKeyExpiringEvent, ApiKeyExpiringFeedEvent] = event(
  "api_key.expiring",
  "ApiKeyExpiringEvent",
  "The key expires in 7 days, or in 1 day",
  {
    ...keyFields,
    name: z.string(),
    expires_at: timestamp,
    // An enum of numbers (a union of literals would come out as one class per value in a generated client).
    days_left: z.enum({ week: 7, day: 1 }),
  },
);

const [WebhookDisabledEvent, WebhookDisabledFeedEvent] = event(
  "webhook.disabled",
  "WebhookDisabledEvent",
  "A webhook stopped receiving events, and why",
  {
    account_id: accountId,
    webhook_id: prefixedId("whk", "0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d"),
    url: z.string(),
    disabled_reason: z.string(),
  },
);

const [UsageThresholdEvent, UsageThresholdFeedEvent] = event(
  "usage.threshold",
  "UsageThresholdEvent",
  "A key used 80 % or 100 % of its day quota (once each a day)",
  {
    ...keyFields,
    period: z.literal("day"),
    limit: z.int(),
    used: z.int(),
    threshold: z.enum({ warning: 80, reached: 100 }),
  },
);

/** Each account event with what the OpenAPI document's webhooks say of it (src/docs/document.ts). */
export const ACCOUNT_EVENTS = [
  [ApiKeyLeakedEvent, "api_key.leaked", "One of the account's keys was found in public and revoked"],
  [ApiKeyExpiringEvent, "api_key.expiring", "One of the account's keys expires in 7 days, or in 1 day"],
  [WebhookDisabledEvent, "webhook.disabled", "One of the account's webhooks was disabled (410, or 5 days of failures)"],
  [UsageThresholdEvent, "usage.threshold", "One of the account's keys reached 80 % or 100 % of its day quota"],
] as const;
type Payload = z.infer<(typeof ACCOUNT_EVENTS)[number][0]>;
export type AccountEventData<T extends AccountEventType> = Extract<Payload, { type: T }>["data"];

export const AccountFeedEvent = z
  .discriminatedUnion("type", [ApiKeyLeakedFeedEvent, ApiKeyExpiringFeedEvent, WebhookDisabledFeedEvent, UsageThresholdFeedEvent])
  .meta({ id: "AccountFeedEvent" });
export type AccountFeedEvent = z.infer<typeof AccountFeedEvent>;

export const AccountEventFeed = z
  .object({
    events: z.array(AccountFeedEvent).meta({ description: "Oldest first" }),
    next_cursor: z.string().nullable().meta({ description: "Pass as `after` for the next page; null when there is none yet" }),
  })
  .meta({ id: "AccountEventFeed" });
export type AccountEventFeed = z.infer<typeof AccountEventFeed>;
