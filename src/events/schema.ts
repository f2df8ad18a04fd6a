import { z } from "zod";
import { money, orNull, signedMoney, timestamp } from "../http/wire.ts";

/**
 * What a webhook receives, declared once: src/observations/events.ts and the test event build values of
 * these types, and the OpenAPI document lists them as its `webhooks` (src/docs/document.ts), so the
 * typed client's event types come from the same declarations.
 */

export const WEBHOOK_TEST_EVENT = "webhook.test";

const eventId = z.string().regex(/^evt_/);

const offerFields = {
  event_id: eventId.meta({ description: "Also the webhook-id header: the same on every retry; use it to drop duplicates" }),
  product_id: z.string(),
  sku: z.string(),
  name: z.string(),
  competitor_id: z.string(),
  competitor_name: z.string(),
  url: z.string().nullable(),
  currency: z.string(),
  observed_at: timestamp,
};

/** Up or down: a named enum, so a client generated from the document has one type for it wherever it is used. */
export const PriceDirection = z.enum(["up", "down"], { error: "must be up or down" }).meta({
  id: "PriceDirection",
  description:
    'Which way a price moved. As an alert rule, only price changes this way: "down" sends 10.00 → 9.50, not 10.00 → 10.50 ' +
    "(nor a change of currency)",
  example: "down",
});

const priceChangedFields = {
  type: z.literal("price.changed"),
  timestamp,
  data: z
    .object({
      ...offerFields,
      old_price: money.nullable().meta({ description: "null when the currency changed (prices cannot be compared)" }),
      new_price: money,
      change_abs: signedMoney.nullable().meta({ description: "new − old, signed" }),
      change_pct: z
        .number()
        .nullable()
        .meta({ description: "change_abs as a percentage of the old price, 2 decimals; null from a price of 0" }),
      direction: orNull(PriceDirection).meta({ description: "null when the currency changed" }),
      // Absent (not null) on the events recorded before these fields existed, which the feed and replay still hold.
      old_total_price: money
        .nullable()
        .optional()
        .meta({
          description:
            "old_price + the shipping cost then; null while shipping was unknown, or when the currency changed (absent on events " +
            "recorded before 2026-11-27)",
        }),
      new_total_price: money
        .nullable()
        .optional()
        .meta({ description: "new_price + shipping_cost; null while shipping is unknown (absent on events recorded before 2026-11-27)" }),
      lowest_price_30d: money
        .nullable()
        .optional()
        .meta({
          description:
            "The offer's lowest price in the 30 days before this change (the EU's prior price); null when the currency changed " +
            "(absent on events recorded before 2026-11-27). The alert rule below_lowest_30d matches when new_price is below it",
        }),
    })
    .meta({ id: "PriceChangedData" }),
};
export const PriceChangedEvent = z.object(priceChangedFields).meta({ id: "PriceChangedEvent" });
export type PriceChangedData = z.infer<typeof PriceChangedEvent>["data"];

const stockChangedFields = {
  type: z.literal("stock.changed"),
  timestamp,
  data: z.object({ ...offerFields, price: money, in_stock_before: z.boolean(), in_stock: z.boolean() }).meta({ id: "StockChangedData" }),
};
export const StockChangedEvent = z.object(stockChangedFields).meta({ id: "StockChangedEvent" });
export type StockChangedData = z.infer<typeof StockChangedEvent>["data"];

export const TestEvent = z
  .object({
    type: z.literal(WEBHOOK_TEST_EVENT),
    timestamp,
    data: z.object({ event_id: eventId, webhook_id: z.string(), message: z.string() }),
  })
  .meta({ id: "TestEvent" });
export type TestEventData = z.infer<typeof TestEvent>["data"];

/**
 * GET /events and the stream: the catalogue's events, as webhooks carry them, with their id. Each is a named
 * component (its `data` too) and the feed's item is a union discriminated by `type`, so a generated client
 * gets one class per event and picks it by `type`.
 */
export const feedEventId = {
  id: eventId.meta({
    description: "The event's id: webhook-id of its deliveries, and the `after` cursor",
    example: "evt_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d",
  }),
};
const PriceChangedFeedEvent = z.object({ ...feedEventId, ...priceChangedFields }).meta({ id: "PriceChangedFeedEvent" });
const StockChangedFeedEvent = z.object({ ...feedEventId, ...stockChangedFields }).meta({ id: "StockChangedFeedEvent" });
export const FeedEvent = z.discriminatedUnion("type", [PriceChangedFeedEvent, StockChangedFeedEvent]).meta({ id: "FeedEvent" });
export type FeedEvent = z.infer<typeof FeedEvent>;

export const EventFeed = z
  .object({
    events: z.array(FeedEvent).meta({ description: "Oldest first" }),
    next_cursor: eventId.nullable().meta({
      description: "Pass as `after` for the next page; null when there is none yet (poll later with `after` = the last id you saw)",
    }),
  })
  .meta({ id: "EventFeed" });
export type EventFeed = z.infer<typeof EventFeed>;
