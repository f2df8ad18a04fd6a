import { z } from "zod";
import { alertFilters } from "../alerts/schema.ts";
import { environmentField } from "../api-keys/schema.ts";
import { WEBHOOK_TEST_EVENT } from "../events/schema.ts";
import { ifThen, later } from "../http/document-rules.ts";
import { DATE_OR_DATE_TIME, isoTimestamp } from "../http/query.ts";
import { uriSchema } from "../http/uri.ts";
import { jsonObject, required } from "../http/validation.ts";
import { graceSeconds, timestamp } from "../http/wire.ts";
import { ACCOUNT_EVENT_TYPES, WEBHOOK_EVENT_TYPES, WEBHOOK_SOURCES } from "../platform/tables.ts";
import { type AccountBudget, budgetLabel } from "../rate-limit/account-budgets.ts";

/** The webhooks' wire shapes, declared once. */

/** min_change_pct: 0 to 1000 (a price can more than double), at most 2 decimals; stored as basis points. */
export const minChangePct = z
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
const webhookUrl = uriSchema("https:// URL of a public host (no localhost, private or link-local addresses)").meta({
  example: "https://example.com/hooks/prices",
});

/** The catalogue's events (every account's) and the account's own events (src/account-events/); the catalogue's by default. */
const SUBSCRIBABLE = [...WEBHOOK_EVENT_TYPES, ...ACCOUNT_EVENT_TYPES] as const;

const webhookEvents = z
  .array(z.enum(SUBSCRIBABLE, { error: `must be one of ${SUBSCRIBABLE.join(", ")}` }), { error: required("array") })
  .min(1, { error: "must name at least one event type" })
  .transform((events) => SUBSCRIBABLE.filter((type) => events.includes(type)));

const webhookDescription = z
  .string({ error: required("string") })
  .trim()
  .max(500, { error: "must be at most 500 characters" })
  .nullable();

/** A test webhook receives its account's sandbox events, which are catalogue events only. */
export const onlySandboxTypes = (events: readonly string[]) =>
  events.every((type) => (WEBHOOK_EVENT_TYPES as readonly string[]).includes(type));
export const SANDBOX_TYPES_ONLY = `a test webhook receives only its account's sandbox events: ${WEBHOOK_EVENT_TYPES.join(", ")}`;

export const webhookBody = z
  .strictObject(
    {
      url: webhookUrl,
      environment: environmentField.default("live").meta({
        description:
          `test: receives only this account's sandbox events (POST /test/observations), only ` +
          `${WEBHOOK_EVENT_TYPES.join(" and ")}; live never receives them`,
      }),
      events: webhookEvents.default([...WEBHOOK_EVENT_TYPES]).meta({
        description:
          "The event types to receive: the catalogue's (price.changed, stock.changed; both by default) and the account's own " +
          "(api_key.leaked, api_key.expiring, webhook.disabled, usage.threshold: only this account's are sent)",
      }),
      min_change_pct: minChangePct
        .default(0)
        .meta({ description: "Only price changes of at least this many percent (0 to 1000, 2 decimals)", example: 5 }),
      filters: alertFilters.default(null),
      description: webhookDescription
        .default(null)
        .meta({ description: "A note for you, up to 500 characters after trimming (UTF-16 code units: an emoji counts twice)" }),
    },
    jsonObject,
  )
  .refine((body) => body.environment === "live" || onlySandboxTypes(body.events), { path: ["events"], error: SANDBOX_TYPES_ONLY })
  // The same rule in JSON Schema: with environment test, every event type is a catalogue one.
  .meta(
    ifThen(
      { properties: { environment: { const: "test" } }, required: ["environment"] },
      { properties: { events: { items: { enum: [...WEBHOOK_EVENT_TYPES] } } } },
    ),
  );
export type WebhookBody = z.output<typeof webhookBody>;

export const webhookIdParam = z.object({
  id: z.string().min(1).meta({ description: "The webhook's id (`whk_…`)", example: "whk_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }),
});
/** PATCH /webhooks/:id: any of the creation fields, and the status; at least one. */
export const webhookPatchBody = z
  .strictObject(
    {
      url: webhookUrl.optional(),
      events: webhookEvents.optional().meta({ description: "The event types to receive" }),
      min_change_pct: minChangePct
        .optional()
        .meta({ description: "Only price changes of at least this many percent (0 to 1000, 2 decimals)" }),
      filters: alertFilters.optional(),
      description: webhookDescription.optional().meta({ description: "A note for you, up to 500 characters; null clears it" }),
      status: z
        .enum(["enabled", "disabled"], { error: "must be enabled or disabled" })
        .optional()
        .meta({ description: "disabled stops deliveries; enabled resumes them and clears disabled_reason" }),
    },
    jsonObject,
  )
  .refine((body) => Object.values(body).some((value) => value !== undefined), {
    error: "name at least one of url, events, min_change_pct, filters, description, status",
  })
  .meta({ minProperties: 1 });
export type WebhookPatch = z.output<typeof webhookPatchBody>;

export const rotateSecretBody = z.strictObject(
  { grace_seconds: graceSeconds("How long deliveries still carry a signature with the previous secret, in seconds; 0: not at all") },
  jsonObject,
);

/** Replay sends at most this many events a call (then 400: narrow since/until). */
export const MAX_REPLAY_EVENTS = 10_000;

/** The API's one ISO-8601 rule (src/http/query.ts): a date-time with Z or an offset, or a date alone (midnight UTC). */
const instant = z.string({ error: required("string") }).pipe(isoTimestamp);

export const replayBody = later(
  z.strictObject(
    {
      since: instant.meta({
        ...DATE_OR_DATE_TIME,
        description:
          "Events at or after this instant (an ISO-8601 date or date-time); events are kept 30 days, so an earlier one means 30 days ago",
        example: "2026-01-31T12:00:00Z",
      }),
      until: instant.optional().meta({
        ...DATE_OR_DATE_TIME,
        description: "Events before this instant (an ISO-8601 date or date-time), later than since; now by default",
      }),
      only_failed: z
        .boolean({ error: required("boolean") })
        .default(false)
        .meta({ description: "Only events this webhook has not received: its last delivery failed for good, or none was made" }),
    },
    jsonObject,
  ),
  "until",
  "since",
);
export type ReplayRequest = z.output<typeof replayBody>;

/**
 * The answer of a call that makes deliveries: how many it handed on and how many the account's budget (`budget`) held
 * back. One shape, named per call, each saying its budget.
 */
const deliveriesQueued = (budget: AccountBudget, queued: string) =>
  z.object({
    queued: z.int().min(0).meta({ description: queued }),
    held_back: z
      .int()
      .min(0)
      .meta({
        description:
          `Deliveries not made: past the account's ${budgetLabel(budget)}. Never sent later on their own; their events stay in the ` +
          "feed (GET /events) and POST /webhooks/{id}/replay sends them once the budget has room",
      }),
    budget: z.string().meta({ description: "The per-account budget these deliveries count in", example: budgetLabel(budget) }),
    refills_at: timestamp.nullable().meta({ description: "When the budget has room for the deliveries held back; null when none was" }),
  });

export const ReplayQueued = deliveriesQueued(
  "replayed-deliveries",
  `How many events are queued for this webhook (at most ${MAX_REPLAY_EVENTS.toLocaleString("en")} a call), oldest first`,
).meta({ id: "ReplayQueued" });
export const TestDeliveriesQueued = deliveriesQueued(
  "test-deliveries",
  "How many deliveries of these changes' sandbox events went to the account's test webhooks",
).meta({ id: "TestDeliveriesQueued" });
export type DeliveriesQueuedView = z.infer<typeof TestDeliveriesQueued>;

export const Webhook = z
  .object({
    id: z
      .string()
      .regex(/^(whk|sub)_/)
      .meta({
        description: "whk_… for a webhook; sub_… for an MCP events subscription (its X-MCP-Subscription-Id)",
        example: "whk_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d",
      }),
    url: z.string(),
    description: z.string().nullable(),
    environment: environmentField,
    events: z.array(z.enum(SUBSCRIBABLE)),
    min_change_pct: z.number().meta({ description: "A price change smaller than this (in %) is not sent" }),
    filters: alertFilters,
    status: z.enum(["enabled", "disabled"]),
    created_at: timestamp,
    disabled_at: timestamp.nullable(),
    disabled_reason: z.string().nullable(),
    source: z.enum(WEBHOOK_SOURCES).meta({
      description:
        "webhook: made with POST /webhooks; mcp: an MCP events subscription, made by one of the account's keys on /mcp " +
        "(events/subscribe), delivered like a webhook; DELETE ends it",
    }),
    expires_at: timestamp
      .nullable()
      .meta({ description: "An MCP subscription's end unless its key refreshes it (nothing is delivered past it); null for a webhook" }),
  })
  .meta({ id: "Webhook", description: "A webhook as listed: never its secret." });
export type WebhookView = z.infer<typeof Webhook>;

export const CreatedWebhook = Webhook.extend({
  secret: z
    .string()
    .regex(/^whsec_/)
    .meta({ description: "The signing secret (Standard Webhooks): in this response only" }),
}).meta({ id: "CreatedWebhook" });
export type CreatedWebhookView = z.infer<typeof CreatedWebhook>;

export const WebhookList = z.object({ webhooks: z.array(Webhook).meta({ description: "Newest first" }) }).meta({ id: "WebhookList" });
export type WebhookListView = z.infer<typeof WebhookList>;

export const TestEventQueued = z
  .object({ event_id: z.string().regex(/^evt_/), type: z.string().meta({ example: WEBHOOK_TEST_EVENT }), status: z.literal("queued") })
  .meta({ id: "TestEventQueued" });
export type TestEventQueuedView = z.infer<typeof TestEventQueued>;

const Delivery = z
  .object({
    event_id: z.string(),
    type: z.string(),
    attempt: z.int().min(1),
    status_code: z.int().nullable().meta({ description: "null when no response came (timeout, connection error)" }),
    error: z.string().nullable(),
    duration_ms: z.int(),
    outcome: z.enum(["delivered", "retrying", "failed", "disabled", "abandoned"]).meta({
      description:
        "delivered (a 2xx); retrying (it is tried again on the schedule); failed (the last attempt failed: no more tries); disabled " +
        "(the endpoint answered 410, which disabled the webhook); abandoned (it was to be retried, but the webhook was disabled: " +
        "no retry is pending)",
    }),
    attempted_at: timestamp.meta({ description: "When the attempt was made (its webhook-timestamp)" }),
    delivered_at: timestamp
      .nullable()
      .meta({ description: "When the receiver accepted it (a 2xx): the attempt's time; null unless delivered" }),
    response_excerpt: z.string().nullable().meta({ description: "The first 1 KiB of the receiver's answer (UTF-8); null without one" }),
    payload: z
      .object({ type: z.string(), timestamp, data: z.record(z.string(), z.unknown()) })
      .nullable()
      .meta({
        description:
          "The body the attempt sent (its id is event_id); null once the event has left D1 for the archive (after a day), and for test " +
          "events",
      }),
  })
  .meta({ id: "Delivery", description: "One delivery attempt" });
export type DeliveryView = z.infer<typeof Delivery>;

export const DeliveryList = z
  .object({ webhook_id: z.string(), deliveries: z.array(Delivery).meta({ description: "The latest 100 attempts, newest first" }) })
  .meta({ id: "DeliveryList" });
export type DeliveryListView = z.infer<typeof DeliveryList>;
