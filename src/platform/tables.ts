import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import type { AlertFilters } from "../alerts/schema.ts";
import type { KeyScope } from "../api-keys/scopes.ts";

/** The plans of spec section 8; the numbers live in src/rate-limit/plans.ts. */
export const PLAN_NAMES = ["free", "standard", "premium"] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

/** Live data, or the account's sandbox (src/sandbox/): a key, a webhook and an event each belong to one. */
export const ENVIRONMENTS = ["live", "test"] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/** A key made with POST /api-keys, or one an OAuth grant made at consent (src/connect/): the grant's tokens act as it. */
export const KEY_KINDS = ["api_key", "connector"] as const;
export type KeyKind = (typeof KEY_KINDS)[number];

/** A row's time of writing, as every timestamp column stores it (ISO-8601 with milliseconds, UTC). */
export const nowText = sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`;

/** One row per IdP subject; the account id is the JWT's `sub`. */
export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  plan: text("plan", { enum: PLAN_NAMES }).notNull().default("free"),
  createdAt: text("created_at").notNull().default(nowText),
});
/** An account as read: the one declaration the guard, the request context and the accounts' service share. */
export type AccountRow = typeof accounts.$inferSelect;

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    name: text("name").notNull(),
    prefix: text("prefix").notNull(),
    /** SHA-256 (hex) of the full key; the key itself is never stored. */
    keyHash: text("key_hash").notNull().unique(),
    status: text("status", { enum: ["active", "revoked"] })
      .notNull()
      .default("active"),
    createdAt: text("created_at").notNull().default(nowText),
    lastUsedAt: text("last_used_at"),
    revokedAt: text("revoked_at"),
    /** Refused from this instant on; "expired" in listings. Set at creation or by a rotation. */
    expiresAt: text("expires_at"),
    /** The key this one replaced, and the key that replaced it (a rotation). */
    rotatedFrom: text("rotated_from"),
    rotatedTo: text("rotated_to"),
    /** Why a revoked key was revoked: "leaked" when a secret scanner reported it; null (shown as "deleted") for a DELETE. */
    revokedReason: text("revoked_reason", { enum: ["deleted", "leaked"] }),
    /** When and where a secret scanner found the key (src/secret-scanning/). */
    leakedAt: text("leaked_at"),
    leakUrl: text("leak_url"),
    /** The CIDRs the key may be used from, a JSON array; null: anywhere. */
    allowedIps: text("allowed_ips", { mode: "json" }).$type<string[]>(),
    /** The scopes the key holds, a JSON array; null: all of them. */
    scopes: text("scopes", { mode: "json" }).$type<KeyScope[]>(),
    /**
     * The last api_key.expiring notice announced for this expiry (7, then 1 days before); null: none yet
     * (src/account-events/expiring.ts).
     */
    expiryNoticeDays: integer("expiry_notice_days"),
    /** `test`: a `pda_test_` key, which reads its account's sandbox (src/sandbox/); kept by a rotation. */
    environment: text("environment", { enum: ENVIRONMENTS }).notNull().default("live"),
    /** `connector`: made by an OAuth grant at consent, named after its client; its secret is never shown to anyone. */
    kind: text("kind", { enum: KEY_KINDS }).notNull().default("api_key"),
  },
  (t) => [
    index("api_keys_account_created").on(t.accountId, t.createdAt),
    // The cron's api_key.expiring: only active keys that expire are in it.
    index("api_keys_expiring").on(t.expiresAt).where(sql`expires_at IS NOT NULL AND status = 'active'`),
  ],
);

// Catalogue
// Money is INTEGER minor units (cents, yen, fils) beside an ISO-4217 currency; src/platform/money.ts converts.
// Timestamps are UTC ISO-8601 as Date#toISOString writes them ("2026-01-31T12:00:00.000Z"), so that
// comparing them as text (history's from/to) orders them in time.

/** Named by the ingesting client, e.g. "cmp_amazon" (the seed's style) or any slug. */
export const competitors = sqliteTable("competitors", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  domain: text("domain"),
});

export const products = sqliteTable(
  "products",
  {
    id: text("id").primaryKey(),
    sku: text("sku").notNull().unique(),
    gtin: text("gtin"),
    mpn: text("mpn"),
    name: text("name").notNull(),
    brand: text("brand"),
    category: text("category"),
    url: text("url"),
    imageUrl: text("image_url"),
    createdAt: text("created_at").notNull().default(nowText),
    /** Moves whenever the product or any of its offers changes; `updated_since` filters on it. */
    updatedAt: text("updated_at").notNull().default(nowText),
    /** The latest price or stock change of any offer; null until the product has one. */
    lastChangedAt: text("last_changed_at"),
    /**
     * The catalogue version whose write last changed this product's view (its row, an offer), set in the same batch as the change (a
     * competitor's rename moves reset_version instead): the snapshot builder rebuilds the segments of the products changed since the
     * version it last built (src/catalogue/snapshot/build.ts), and ingestion guards its write with it (src/observations/write.ts).
     */
    changedVersion: integer("changed_version").notNull().default(0),
  },
  (t) => [
    index("products_updated_at").on(t.updatedAt),
    index("products_changed_version").on(t.changedVersion, t.id),
    // The brand and category filters (src/catalogue/filtered.ts): SQLite's lower() folds ASCII only, as the filter's query expects.
    index("products_brand").on(sql`lower(${t.brand})`, t.id),
    index("products_category").on(sql`lower(${t.category})`, t.id),
  ],
);

/** An offer's condition, how its last check went, and the units its quantity may be in (docs/observations.md). */
export const OFFER_CONDITIONS = ["new", "used", "refurbished"] as const;
export const CHECK_STATUSES = ["ok", "not_found", "blocked"] as const;
export const QUANTITY_UNITS = ["g", "kg", "ml", "l", "cm", "m", "m2", "count"] as const;
/** One price the offer held before its current one: [when it ended (ISO), its minor units]. */
export type PriorPrice = [string, number];

/** A competitor's current offer for a product: one per (product, competitor). */
export const offers = sqliteTable(
  "offers",
  {
    productId: text("product_id")
      .notNull()
      .references(() => products.id),
    competitorId: text("competitor_id")
      .notNull()
      .references(() => competitors.id),
    url: text("url"),
    priceMinor: integer("price_minor").notNull(),
    regularPriceMinor: integer("regular_price_minor"),
    currency: text("currency").notNull(),
    shippingMinor: integer("shipping_minor"),
    inStock: integer("in_stock", { mode: "boolean" }).notNull(),
    /** The price before the latest change, in the offer's current currency. */
    previousPriceMinor: integer("previous_price_minor"),
    priceChangedAt: text("price_changed_at"),
    checkedAt: text("checked_at").notNull().default(nowText),
    seller: text("seller"),
    condition: text("condition", { enum: OFFER_CONDITIONS }).notNull().default("new"),
    /** A positive decimal string, with its unit (both or neither): the unit price's divisor. */
    quantity: text("quantity"),
    unit: text("unit", { enum: QUANTITY_UNITS }),
    checkStatus: text("check_status", { enum: CHECK_STATUSES }).notNull().default("ok"),
    /**
     * The lowest price of the 30 days before the current price took effect, set when the price changes (src/observations/prior-prices.ts),
     * from `prior_prices`: the offer's own recent prices, so neither a read nor the history's move to R2 touches it.
     */
    lowestPrice30dMinor: integer("lowest_price_30d_minor"),
    priorPrices: text("prior_prices", { mode: "json" }).$type<PriorPrice[]>().notNull().default(sql`'[]'`),
  },
  (t) => [
    primaryKey({ columns: [t.productId, t.competitorId] }),
    // The competitor filter reads a competitor's products in id order from it (src/catalogue/filtered.ts).
    index("offers_competitor").on(t.competitorId, t.productId),
    check(
      "offers_money_not_negative",
      sql`${t.priceMinor} >= 0 AND coalesce(${t.regularPriceMinor}, 0) >= 0 AND coalesce(${t.shippingMinor}, 0) >= 0 AND coalesce(${t.previousPriceMinor}, 0) >= 0`,
    ),
  ],
);

/** A day's reference rates (PUT /admin/fx-rates): units of each currency for one unit of `base`, decimal strings. */
export const fxRates = sqliteTable("fx_rates", {
  date: text("date").primaryKey(),
  base: text("base").notNull(),
  rates: text("rates", { mode: "json" }).$type<Record<string, string>>().notNull(),
  updatedAt: text("updated_at").notNull().default(nowText),
});

/** Appended when an offer's price or stock changes; read by GET /products/:id/history. */
export const priceHistory = sqliteTable(
  "price_history",
  {
    id: integer("id").primaryKey(),
    productId: text("product_id")
      .notNull()
      .references(() => products.id),
    competitorId: text("competitor_id")
      .notNull()
      .references(() => competitors.id),
    priceMinor: integer("price_minor").notNull(),
    currency: text("currency").notNull(),
    inStock: integer("in_stock", { mode: "boolean" }).notNull(),
    observedAt: text("observed_at").notNull(),
  },
  (t) => [
    index("price_history_product_observed").on(t.productId, t.observedAt),
    check("price_history_price_not_negative", sql`${t.priceMinor} >= 0`),
  ],
);

/**
 * One row (id 1). `version` moves on every catalogue change (a write marks its products with the version it moved to);
 * the snapshot builder compares it with the version it last built (src/catalogue/snapshot/build.ts).
 */
export const catalogueState = sqliteTable(
  "catalogue_state",
  {
    id: integer("id").primaryKey(),
    version: integer("version").notNull(),
    /** Set to the new version by a write that replaces or deletes products (the seed): the next snapshot is a full build. */
    resetVersion: integer("reset_version").notNull().default(0),
    updatedAt: text("updated_at").notNull().default(nowText),
  },
  (t) => [check("catalogue_state_single_row", sql`${t.id} = 1`)],
);

// Webhooks

export const WEBHOOK_EVENT_TYPES = ["price.changed", "stock.changed"] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
/** What happened to an account's keys and webhooks (src/account-events/): its own webhooks may subscribe to them. */
export const ACCOUNT_EVENT_TYPES = ["api_key.leaked", "api_key.expiring", "webhook.disabled", "usage.threshold"] as const;
export type AccountEventType = (typeof ACCOUNT_EVENT_TYPES)[number];
export const WEBHOOK_SOURCES = ["webhook", "mcp"] as const;

/** An account's endpoint. The signing secret is stored only encrypted (src/webhooks/secrets.ts). */
export const webhooks = sqliteTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    url: text("url").notNull(),
    description: text("description"),
    /** The event types it receives, a JSON array. */
    events: text("events", { mode: "json" }).notNull().$type<(WebhookEventType | AccountEventType)[]>(),
    /** min_change_pct × 100 (basis points), so the threshold compares exactly with integer prices. */
    minChangeBp: integer("min_change_bp").notNull().default(0),
    /** The alert rules (src/alerts/schema.ts), a JSON object as the account gave them; null: none. */
    filters: text("filters", { mode: "json" }).$type<AlertFilters>(),
    status: text("status", { enum: ["enabled", "disabled"] })
      .notNull()
      .default("enabled"),
    /** `v1.<base64 iv>.<base64 AES-GCM ciphertext>` of the `whsec_…` secret, under WEBHOOK_SECRET_KEY. */
    secretCiphertext: text("secret_ciphertext").notNull(),
    createdAt: text("created_at").notNull().default(nowText),
    disabledAt: text("disabled_at"),
    disabledReason: text("disabled_reason"),
    /** The first failed attempt since the last success (null while deliveries succeed): the 5-day rule. */
    failingSince: text("failing_since"),
    /** After a rotation: the previous secret (encrypted the same way) and until when deliveries still carry its signature. */
    previousSecretCiphertext: text("previous_secret_ciphertext"),
    previousSecretExpiresAt: text("previous_secret_expires_at"),
    /** `test`: receives only its account's sandbox events; `live`: never them. Fixed at creation. */
    environment: text("environment", { enum: ENVIRONMENTS }).notNull().default("live"),
    /** mcp: an MCP events subscription (src/mcp/events/) of key api_key_id, lapsing at expires_at; a webhook has neither. */
    source: text("source", { enum: WEBHOOK_SOURCES }).notNull().default("webhook"),
    expiresAt: text("expires_at"),
    apiKeyId: text("api_key_id"),
    /**
     * An MCP subscription's pending gap: the last event its account's budget held back (src/webhooks/delivery/mcp-gaps.ts), until a
     * `gap` envelope carrying it is sent or a refresh answers `truncated`; null: none.
     */
    gapCursor: text("gap_cursor"),
  },
  (t) => [
    index("webhooks_account_created").on(t.accountId, t.createdAt),
    index("webhooks_status").on(t.status),
    index("webhooks_expires").on(t.expiresAt),
  ],
);

/**
 * What selects an enabled webhook for a batch (src/webhooks/delivery/rows.ts): the values of its list rules (`kind`: competitors,
 * brands, categories, skus), or its event types (`kind`: events) when it has no list; `lists`: how many lists it is filed under.
 * Kept in step with `webhooks` by triggers (migrations/0015_webhook_rule_values.sql), never written by the code.
 */
export const webhookRuleValues = sqliteTable(
  "webhook_rule_values",
  {
    webhookId: text("webhook_id")
      .notNull()
      .references(() => webhooks.id, { onDelete: "cascade" }),
    kind: text("kind", { enum: ["events", "competitors", "brands", "categories", "skus"] }).notNull(),
    value: text("value").notNull(),
    lists: integer("lists").notNull(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.value, t.lists, t.webhookId] }), index("webhook_rule_values_webhook").on(t.webhookId)],
);

/**
 * One row per delivery attempt; the webhook's rows go with it when it is deleted. Attempts older than a few
 * minutes move to R2 (src/webhooks/delivery/delivery-archive.ts): AUTOINCREMENT, so an id is never given again once
 * its row has left (readers merge D1's rows and the archive's by id, and order them by it).
 */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    eventId: text("event_id").notNull(),
    webhookId: text("webhook_id")
      .notNull()
      .references(() => webhooks.id, { onDelete: "cascade" }),
    type: text("type").notNull(),
    attempt: integer("attempt").notNull(),
    /** null when no response came (timeout, connection error). */
    statusCode: integer("status_code"),
    error: text("error"),
    durationMs: integer("duration_ms").notNull(),
    /** "delivered"; "retrying" (another attempt is scheduled); "failed" (the last attempt, dead-lettered); "disabled" (410). */
    outcome: text("outcome", { enum: ["delivered", "retrying", "failed", "disabled", "abandoned"] }).notNull(),
    /** When the attempt was made (its webhook-timestamp). */
    deliveredAt: text("delivered_at").notNull(),
    /** The first 1 KiB of the receiver's answer (cut on a UTF-8 character boundary); null without one. */
    responseExcerpt: text("response_excerpt"),
  },
  (t) => [index("webhook_deliveries_webhook").on(t.webhookId, t.id), index("webhook_deliveries_event").on(t.webhookId, t.eventId)],
);

/**
 * The outbox and the events feed: every catalogue event, written in the same D1 batch as the change
 * that causes it (src/observations/write.ts), kept 30 days. `seq` orders the feed in commit order (AUTOINCREMENT:
 * never reused after the retention deletes); `relayed_at` is set once the event is on WEBHOOK_QUEUE,
 * `claimed_at` while a consumer fans it out (a lease), `fanned_out_at` once its deliveries are queued.
 */
export const events = sqliteTable(
  "events",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    id: text("id").notNull().unique(),
    type: text("type").notNull(),
    timestamp: text("timestamp").notNull(),
    /** `{type, timestamp, data}`, exactly as webhooks carry it. */
    payload: text("payload").notNull(),
    /** A price change in minor units, for min_change_pct (null: not a price change, or not comparable). */
    oldMinor: integer("old_minor"),
    newMinor: integer("new_minor"),
    createdAt: text("created_at").notNull().default(nowText),
    relayedAt: text("relayed_at"),
    claimedAt: text("claimed_at"),
    fannedOutAt: text("fanned_out_at"),
    /**
     * Set for an account event (src/account-events/): delivered to that account's webhooks only, never in GET /events.
     * (A sandbox's events are never here: they live in its account's object, src/sandbox/object.ts.)
     */
    accountId: text("account_id"),
  },
  (t) => [
    index("events_timestamp").on(t.timestamp),
    // GET /events?type=…: one type's events in commit order, without reading the other's.
    index("events_type_seq").on(t.type, t.seq),
    index("events_unrelayed").on(t.createdAt).where(sql`relayed_at IS NULL`),
    index("events_not_fanned_out").on(t.relayedAt).where(sql`fanned_out_at IS NULL`),
    // Every feed's range in commit order, one account's or the catalogue's (account_id NULL) alone: no account's events
    // lie in another's range, nor in the catalogue's.
    index("events_account").on(t.accountId, t.seq),
    // Where the catalogue's feed starts at a time (src/events/archive-read.ts firstSeqSince), among its events alone.
    index("events_catalogue_timestamp").on(t.timestamp).where(sql`account_id IS NULL`),
  ],
);

/**
 * The events archive's index: one row per R2 object (src/events/archive.ts), each holding the events of
 * seq first_seq..last_seq that left D1. Its highest last_seq is the archive's high-water mark: D1 serves
 * the feed above it, R2 at and below it. Rows leave with their object after the 30-day retention.
 */
export const eventArchive = sqliteTable(
  "event_archive",
  {
    firstSeq: integer("first_seq").primaryKey(),
    lastSeq: integer("last_seq").notNull(),
    minTimestamp: text("min_timestamp").notNull(),
    maxTimestamp: text("max_timestamp").notNull(),
    count: integer("count").notNull(),
  },
  (t) => [index("event_archive_max_timestamp").on(t.maxTimestamp)],
);
