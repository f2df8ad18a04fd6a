import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { DAY_MS } from "../platform/time.ts";

// The alert windows' own tables: what they keep of offers' history that left D1's price_history (src/alerts/windows.ts).
// They live in a D1 database of their own (the ALERTS_DB binding, migrations-alerts/, drizzle-alerts.config.ts): the
// alert windows read them and the history archiver writes them, nothing else. Both are derived data, written from the
// history the archiver moves, so the move from the main database carried no rows over (migrations/0028 says what a
// window misses for a while after it).
//
// Bytes a row matter here (docs/scale.md: tens of millions of day rows at the model's load), so: both tables are
// WITHOUT ROWID (added by hand to the migration, drizzle has no option for it), so a row is stored once, in its
// primary key's B-tree, not a second time in a rowid table; days are integers (days since 1970-01-01) and instants
// integer Unix milliseconds, not ISO text; and no secondary index, whose every entry would repeat the whole primary
// key (the archiver finds days to fold by walking the primary key with a cursor instead: offer_fold_cursor).

/**
 * What the alert windows (new_low_days, new_high_days over 2 days) keep of history that left D1: per offer, UTC day
 * and currency, the day's lowest and highest price and its last one. Written by the history archiver before it deletes
 * the rows it moved from the main database (src/catalogue/history-archive.ts), so a row is always in price_history,
 * here, or both; a window reads these by primary key range (src/alerts/windows.ts), never the archive's objects.
 */
export const offerPriceDays = sqliteTable(
  "offer_price_days",
  {
    productId: text("product_id").notNull(),
    competitorId: text("competitor_id").notNull(),
    /** Days since 1970-01-01 (UTC) of observed_at. */
    day: integer("day").notNull(),
    currency: text("currency").notNull(),
    lowMinor: integer("low_minor").notNull(),
    highMinor: integer("high_minor").notNull(),
    /** The day's last price in this currency, and when it took effect (Unix ms): the price held when a later window opens. */
    closeMinor: integer("close_minor").notNull(),
    closedAt: integer("closed_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.productId, t.competitorId, t.day, t.currency] })],
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
    /** Days since 1970-01-01: the days before it are folded here. */
    through: integer("through").notNull(),
    /** Per currency: [last day held (days since 1970-01-01), minor units] pairs, oldest first; lows rising, highs falling. */
    extremes: text("extremes", { mode: "json" }).$type<Record<string, { lows: [number, number][]; highs: [number, number][] }>>().notNull(),
    closeMinor: integer("close_minor").notNull(),
    closeCurrency: text("close_currency").notNull(),
    /** Unix ms. */
    closedAt: integer("closed_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.productId, t.competitorId] })],
);

/**
 * Where the archiver's walk over offer_price_days stopped (one row, id 1): each run reads the next rows in primary key
 * order from here, folds the offers among them that hold days past OFFER_DAYS_KEPT_MS, and moves the cursor on,
 * starting over from the first offer once it reaches the end.
 */
export const offerFoldCursor = sqliteTable("offer_fold_cursor", {
  id: integer("id").primaryKey(),
  productId: text("product_id").notNull(),
  competitorId: text("competitor_id").notNull(),
});

/** A UTC day (YYYY-MM-DD, or any ISO instant on it) as the tables keep it: days since 1970-01-01. */
export const dayNumber = (iso: string): number => Math.floor(Date.parse(iso.slice(0, 10)) / DAY_MS);
/** A stored day as YYYY-MM-DD, the form the windows compare. */
export const dayText = (day: number): string => new Date(day * DAY_MS).toISOString().slice(0, 10);
