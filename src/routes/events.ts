import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import { WEBHOOK_TEST_EVENT } from "../webhooks/messages.ts";

/**
 * What a webhook receives (src/services/ingestion.ts and sendTestEvent build these), as the OpenAPI
 * document's `webhooks`, so the typed client's event types come from the same document.
 */

const timestamp = z.iso.datetime();
const money = z.string().regex(/^-?\d+(\.\d+)?$/);

const offerFields = {
  event_id: z.string().regex(/^evt_/).meta({ description: "Also the webhook-id header: the same on every retry; use it to drop duplicates" }),
  product_id: z.string(),
  sku: z.string(),
  name: z.string(),
  competitor_id: z.string(),
  competitor_name: z.string(),
  url: z.string().nullable(),
  currency: z.string(),
  observed_at: timestamp,
};

export const PriceChangedEvent = z
  .object({
    type: z.literal("price.changed"),
    timestamp,
    data: z.object({
      ...offerFields,
      old_price: money.nullable().meta({ description: "null when the currency changed (prices cannot be compared)" }),
      new_price: money,
      change_abs: money.nullable().meta({ description: "new − old, signed" }),
      change_pct: z.number().nullable().meta({ description: "change_abs as a percentage of the old price, 2 decimals; null from a price of 0" }),
      direction: z.enum(["up", "down"]).nullable(),
    }),
  })
  .meta({ id: "PriceChangedEvent" });

export const StockChangedEvent = z
  .object({
    type: z.literal("stock.changed"),
    timestamp,
    data: z.object({ ...offerFields, price: money, in_stock_before: z.boolean(), in_stock: z.boolean() }),
  })
  .meta({ id: "StockChangedEvent" });

export const TestEvent = z
  .object({
    type: z.literal(WEBHOOK_TEST_EVENT),
    timestamp,
    data: z.object({ event_id: z.string().regex(/^evt_/), webhook_id: z.string(), message: z.string() }),
  })
  .meta({ id: "TestEvent" });

const deliveryHeaders = z.object({
  "webhook-id": z.string().meta({ description: "The event id, the same on every retry" }),
  "webhook-timestamp": z.string().meta({ description: "Unix seconds of this attempt" }),
  "webhook-signature": z.string().meta({ description: 'v1,<base64 HMAC-SHA256 of "id.timestamp.body"> keyed with the secret; verify with a Standard Webhooks library' }),
});

const EVENTS = [
  [PriceChangedEvent, "price.changed", "An offer's price changed (at least the webhook's min_change_pct)"],
  [StockChangedEvent, "stock.changed", "An offer went in or out of stock"],
  [TestEvent, WEBHOOK_TEST_EVENT, "Sent by POST /webhooks/{id}/test"],
] as const;

export function registerWebhookEvents(registry: OpenAPIHono["openAPIRegistry"]): void {
  for (const [schema, name, summary] of EVENTS) {
    registry.registerWebhook({
      method: "post",
      path: name,
      operationId: `${name.replace(".", "_")}_event`,
      summary,
      description:
        "A signed POST to the webhook's URL (Standard Webhooks). Answer 2xx within 15 s; anything else is retried with exponential backoff for about a day; 410 disables the webhook.",
      request: { headers: deliveryHeaders, body: { required: true, content: { "application/json": { schema } } } },
      responses: { 200: { description: "Any 2xx: delivered" }, 410: { description: "Gone: the webhook is disabled" } },
    });
  }
}
