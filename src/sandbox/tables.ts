import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { accounts } from "../platform/tables.ts";

// The sandbox (src/sandbox/): a fixed synthetic catalogue generated in the isolate, and each account's changes to it.

/**
 * A sandbox product an account changed: its row and the offers it changed or added, as the catalogue's own row types
 * (src/catalogue/views.ts), as JSON, so a field the offers gain reaches the sandbox without a migration. `version`
 * moves on each write; a write is guarded by the version it read (src/sandbox/overlay.ts).
 */
export const sandboxProducts = sqliteTable(
  "sandbox_products",
  {
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    productId: text("product_id").notNull(),
    version: integer("version").notNull(),
    /** `{"product": ProductRow, "offers": OfferRow[]}`: the account's own offers, laid over the base's of the same shops. */
    state: text("state").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.productId] })],
);

/** The price and stock changes an account made to its sandbox, beside the generated history. */
export const sandboxHistory = sqliteTable(
  "sandbox_history",
  {
    id: integer("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    productId: text("product_id").notNull(),
    competitorId: text("competitor_id").notNull(),
    priceMinor: integer("price_minor").notNull(),
    currency: text("currency").notNull(),
    inStock: integer("in_stock", { mode: "boolean" }).notNull(),
    observedAt: text("observed_at").notNull(),
  },
  (t) => [
    index("sandbox_history_product").on(t.accountId, t.productId, t.observedAt),
    // The cron's retention: the oldest rows first (src/sandbox/overlay.ts).
    index("sandbox_history_observed").on(t.observedAt),
  ],
);
