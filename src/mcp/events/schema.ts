import { z } from "zod";
import { alertFilterFields, MAX_FILTERS_BYTES, requireCurrency } from "../../alerts/schema.ts";
import { PriceChangedEvent, StockChangedEvent } from "../../events/schema.ts";
import { WEBHOOK_EVENT_TYPES } from "../../platform/tables.ts";
import { minChangePct } from "../../webhooks/schema.ts";

/**
 * The MCP events extension's params (its design sketch, `experimental-ext-triggers-events`), declared once: what
 * events/list offers and what events/poll, events/subscribe and events/unsubscribe take. Each method's params are
 * checked here; what fails is a JSON-RPC -32602 whose message names the field (src/mcp/events/methods.ts).
 */

export const EVENT_NAMES = WEBHOOK_EVENT_TYPES;
export type EventName = (typeof EVENT_NAMES)[number];

/** A subscription's arguments: a webhook's alert rules (`filters`) and its min_change_pct, at the top level. */
export const eventArguments = z
  .strictObject({
    ...alertFilterFields,
    min_change_pct: minChangePct
      .optional()
      .meta({ description: "Only price changes of at least this many percent (0 to 1000, 2 decimals)", example: 5 }),
  })
  .superRefine(requireCurrency)
  .refine((rules) => new TextEncoder().encode(JSON.stringify(rules)).byteLength <= MAX_FILTERS_BYTES, {
    error: `must be at most 16 KiB (${MAX_FILTERS_BYTES.toLocaleString("en")} bytes) as JSON`,
  });

const name = z.string({ error: "must be a string: an event name from events/list" });
const args = z.unknown().optional();
const cursor = z
  .string({ error: "must be a string (a cursor this server gave, or an event id of GET /events) or null" })
  .regex(/^evt_[0-9a-f]{32}$/, { error: "must be a cursor this server gave (evt_ and 32 hex digits), or null for now" })
  .nullable()
  .optional();
const maxAgeMs = z.int({ error: "must be a whole number of milliseconds" }).min(0, { error: "must be at least 0" }).optional();

/** How many matching events a poll returns at most, and by default. */
const MAX_POLL_EVENTS = 1000;
export const DEFAULT_POLL_EVENTS = 100;

export const pollParams = z.object({
  name,
  arguments: args,
  cursor,
  maxAgeMs,
  maxEvents: z
    .int({ error: `must be a whole number from 1 to ${MAX_POLL_EVENTS}` })
    .min(1, { error: `must be from 1 to ${MAX_POLL_EVENTS}` })
    .max(MAX_POLL_EVENTS, { error: `must be from 1 to ${MAX_POLL_EVENTS}` })
    .optional(),
});

/** Standard Webhooks' symmetric secret: whsec_ and base64 of 24 to 64 bytes (the client's; the server never makes one). */
const SECRET = /^whsec_([A-Za-z0-9+/]+={0,2})$/;
const secretBytes = (secret: string) => {
  const base64 = SECRET.exec(secret)?.[1];
  if (base64 === undefined || base64.length % 4 !== 0) return 0;
  return (base64.length / 4) * 3 - (base64.endsWith("==") ? 2 : base64.endsWith("=") ? 1 : 0);
};
const secret = z
  .string({ error: "is required: whsec_ followed by base64 of 24 to 64 random bytes (Standard Webhooks)" })
  .refine((value) => secretBytes(value) >= 24 && secretBytes(value) <= 64, {
    error: "must be whsec_ followed by base64 of 24 to 64 random bytes (Standard Webhooks)",
  });

const url = z.string({ error: "is required: the https:// URL deliveries are POSTed to" });

export const subscribeParams = z.object({
  name,
  arguments: args,
  delivery: z.object({ mode: z.string().optional(), url, secret }, { error: 'is required: {mode: "webhook", url, secret}' }),
  cursor,
  maxAgeMs,
  ttlMs: z.int({ error: "must be a whole number of milliseconds, or null" }).min(0, { error: "must be at least 0" }).nullable().optional(),
});

export const unsubscribeParams = z.object({
  name,
  arguments: args,
  delivery: z.object({ url }, { error: "is required: {url}, the subscription's delivery URL" }),
});

/** A granted TTL: the client's suggestion within these (no expiry is never granted: null gets the longest). */
export const MIN_TTL_MS = 60_000;
export const DEFAULT_TTL_MS = 60 * 60_000;
export const MAX_TTL_MS = 24 * 60 * 60_000;

/** How often a poller is asked to come back (ms), when nothing more is waiting. */
export const NEXT_POLL_MS = 10_000;

const PAYLOADS = { "price.changed": PriceChangedEvent, "stock.changed": StockChangedEvent };

const DESCRIPTIONS: Record<EventName, string> = {
  "price.changed":
    "An offer's price changed (GET /events' price.changed): the arguments are a webhook's alert rules, e.g. " +
    '{"brands":["Sony"],"currency":"USD","price_below":"280.00"} for a crossing below 280.00.',
  "stock.changed": "An offer went in or out of stock (GET /events' stock.changed); only competitors, brands, categories and skus apply.",
};

/** events/list's answer: both types, each with poll and webhook delivery, the arguments' and the payload's JSON Schema. */
export function eventTypes() {
  const inputSchema = z.toJSONSchema(eventArguments, { io: "input", unrepresentable: "any" });
  return EVENT_NAMES.map((eventName) => ({
    name: eventName,
    description: DESCRIPTIONS[eventName],
    delivery: ["poll", "webhook"],
    inputSchema,
    // The `data` of GET /events' event of this type (each occurrence's `data`).
    payloadSchema: z.toJSONSchema(PAYLOADS[eventName].shape.data, { io: "output", unrepresentable: "any" }),
  }));
}
