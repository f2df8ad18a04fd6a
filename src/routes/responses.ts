import { z } from "zod";
import { PLAN_NAMES, WEBHOOK_EVENT_TYPES } from "../db/schema.ts";
import type { CompetitorView, HistoryView, OfferView, ProductView, SummaryView } from "../services/catalogue.ts";
import type { IngestionResult } from "../services/ingestion.ts";
import { WEBHOOK_TEST_EVENT } from "../webhooks/messages.ts";

/**
 * The response bodies, as zod schemas: src/routes/openapi.ts puts them in the OpenAPI document
 * (`.meta({ id })` makes each a component), the handlers' `c.json(…, status)` is type-checked against
 * them by @hono/zod-openapi, and test/openapi/ validates every real response against the document.
 */

const timestamp = z.iso.datetime().meta({ description: "UTC, ISO-8601", example: "2026-01-31T12:00:00.000Z" });
const money = z
  .string()
  .regex(/^\d+(\.\d+)?$/)
  .meta({ description: "A decimal string in the currency's own minor units, never a float", example: "14.99" });
const currency = z
  .string()
  .regex(/^[A-Z]{3}$/)
  .meta({ description: "ISO-4217", example: "USD" });

export const ErrorBody = z
  .object({ detail: z.string().min(1).meta({ description: "One sentence a person can act on" }) })
  .meta({ id: "Error", description: "Every error: one sentence saying what went wrong and what to do." });

// ---- Account and keys ---------------------------------------------------------------------------

export const Limits = z
  .object({ per_minute: z.int(), per_hour: z.int(), per_day: z.int() })
  .meta({ id: "Limits", description: "The plan's limits for each of the account's keys" });

export const Account = z
  .object({ id: z.string().meta({ description: "The account login's `sub`" }), plan: z.enum(PLAN_NAMES), limits: Limits, created_at: timestamp })
  .meta({ id: "Account" });

const keyFields = {
  id: z.string().regex(/^key_/).meta({ example: "key_3f2a…" }),
  name: z.string(),
  prefix: z.string().meta({ description: "The only part of the key ever listed", example: "pda_live_Ab12Cd34" }),
};

export const ApiKey = z
  .object({
    ...keyFields,
    status: z.enum(["active", "revoked"]),
    created_at: timestamp,
    last_used_at: timestamp.nullable().meta({ description: "Updated at most once a minute" }),
    revoked_at: timestamp.nullable(),
  })
  .meta({ id: "ApiKey", description: "A key as listed: never the full key." });

export const CreatedApiKey = z
  .object({
    ...keyFields,
    key: z.string().meta({ description: "The full key: in this response only; store it now", example: "pda_live_…" }),
    status: z.literal("active"),
    created_at: timestamp,
  })
  .meta({ id: "CreatedApiKey" });

export const ApiKeyList = z.object({ api_keys: z.array(ApiKey).meta({ description: "Newest first, revoked keys included" }) }).meta({ id: "ApiKeyList" });

// ---- Catalogue ----------------------------------------------------------------------------------

export const Offer = z
  .object({
    competitor_id: z.string(),
    competitor_name: z.string(),
    url: z.string().nullable(),
    price: money,
    regular_price: money.nullable(),
    currency,
    shipping_cost: money.nullable(),
    in_stock: z.boolean(),
    previous_price: money.nullable().meta({ description: "The price before the latest change" }),
    price_changed_at: timestamp.nullable(),
    checked_at: timestamp,
  })
  .meta({ id: "Offer", description: "A competitor's current offer" });

export const Summary = z
  .object({
    min_price: money.nullable(),
    max_price: money.nullable(),
    currency: currency.nullable().meta({ description: "The product's most common offer currency; min/max/lowest are over its offers only" }),
    offer_count: z.int(),
    in_stock_count: z.int(),
    lowest_competitor_id: z.string().nullable(),
  })
  .meta({ id: "Summary" });

export const Product = z
  .object({
    id: z.string().regex(/^prd_/),
    sku: z.string(),
    gtin: z.string().nullable(),
    mpn: z.string().nullable(),
    name: z.string(),
    brand: z.string().nullable(),
    category: z.string().nullable(),
    url: z.string().nullable(),
    image_url: z.string().nullable(),
    offers: z.array(Offer),
    summary: Summary,
    created_at: timestamp,
    updated_at: timestamp,
    last_changed_at: timestamp.nullable(),
  })
  .meta({ id: "Product" });

export const ProductList = z.object({ products: z.array(Product) }).meta({ id: "ProductList" });

export const History = z
  .object({
    product_id: z.string(),
    history: z
      .array(z.object({ competitor_id: z.string(), price: money, currency, in_stock: z.boolean(), observed_at: timestamp }))
      .meta({ description: "Oldest first; at most 1,000 (then X-Result-Truncated: true)" }),
  })
  .meta({ id: "History" });

export const Competitor = z
  .object({ id: z.string(), name: z.string(), domain: z.string().nullable(), offer_count: z.int() })
  .meta({ id: "Competitor" });

export const CompetitorList = z.object({ competitors: z.array(Competitor) }).meta({ id: "CompetitorList" });

export const IngestionSummary = z
  .object({ received: z.int(), products_created: z.int(), offers_created: z.int(), price_changes: z.int(), stock_changes: z.int() })
  .meta({ id: "IngestionResult" });

// ---- Webhooks -----------------------------------------------------------------------------------

export const Webhook = z
  .object({
    id: z.string().regex(/^whk_/),
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

export const DeliveryList = z
  .object({ webhook_id: z.string(), deliveries: z.array(Delivery).meta({ description: "The latest 100 attempts, newest first" }) })
  .meta({ id: "DeliveryList" });

// ---- The catalogue's bodies are serialised once per catalogue version, not by c.json: -------------
// so that its view types cannot drift from the schemas above, tsc checks that they are the same types.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Expect<_ extends true> = never;
export type ViewsAgree = [
  Expect<Same<ProductView, z.output<typeof Product>>>,
  Expect<Same<OfferView, z.output<typeof Offer>>>,
  Expect<Same<SummaryView, z.output<typeof Summary>>>,
  Expect<Same<CompetitorView, z.output<typeof Competitor>>>,
  Expect<Same<HistoryView, z.output<typeof History>>>,
  Expect<Same<IngestionResult, z.output<typeof IngestionSummary>>>,
];
