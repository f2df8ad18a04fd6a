import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

// The alert windows' own tables: what they keep of offers' history that left D1's price_history (src/alerts/windows.ts).

/**
 * What the alert windows (new_low_days, new_high_days over 2 days) keep of history that left D1: per offer, UTC day
 * and currency, the day's lowest and highest price and its last one. Written by the history archiver in the batch
 * that deletes the rows it moved (src/catalogue/history-archive.ts), so a row is always in price_history, here, or
 * both; a window reads these by index range (src/alerts/windows.ts), never the archive's objects.
 */
export const offerPriceDays = sqliteTable(
  "offer_price_days",
  {
    productId: text("product_id").notNull(),
    competitorId: text("competitor_id").notNull(),
    /** YYYY-MM-DD (UTC) of observed_at. */
    day: text("day").notNull(),
    currency: text("currency").notNull(),
    lowMinor: integer("low_minor").notNull(),
    highMinor: integer("high_minor").notNull(),
    /** The day's last price in this currency, and when it took effect: the price held when a later window opens. */
    closeMinor: integer("close_minor").notNull(),
    closedAt: text("closed_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.productId, t.competitorId, t.day, t.currency] }),
    // The archiver's fold of days past the feed's reach into offer_price_far.
    index("offer_price_days_day").on(t.day),
  ],
);

/**
 * An offer's days older than the feed's reach, folded (src/catalogue/history-archive.ts rolls them out of
 * offer_price_days): per currency, the suffix minima and maxima of its prices by the last day each was held, and the
 * price it held at `through`, the day its days are folded up to (src/alerts/windows.ts reads them).
 */
export const offerPriceFar = sqliteTable(
  "offer_price_far",
  {
    productId: text("product_id").notNull(),
    competitorId: text("competitor_id").notNull(),
    /** YYYY-MM-DD: the days before it are folded here. */
    through: text("through").notNull(),
    /** Per currency: [last day held, minor units] pairs, oldest first; lows rising, highs falling. */
    extremes: text("extremes", { mode: "json" }).$type<Record<string, { lows: [string, number][]; highs: [string, number][] }>>().notNull(),
    closeMinor: integer("close_minor").notNull(),
    closeCurrency: text("close_currency").notNull(),
    closedAt: text("closed_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.productId, t.competitorId] })],
);
