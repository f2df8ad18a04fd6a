import { and, asc, eq, getTableColumns, lt, sql } from "drizzle-orm";
import pLimit from "p-limit";
import { MAX_WINDOW_DAYS } from "../alerts/schema.ts";
import { offerPriceDays, offerPriceFar } from "../alerts/tables.ts";
import { foldDays, type OfferDay, type OfferFar } from "../alerts/windows.ts";
import {
  HISTORY_ARCHIVE_AFTER_MS,
  HISTORY_ARCHIVE_PRODUCTS_PER_RUN,
  HISTORY_IN_D1_MS,
  OFFER_DAYS_KEPT_MS,
  RETENTION_MS,
} from "../events/retention.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import { withCronLease } from "../platform/cron-lease.ts";
import type { Database } from "../platform/db.ts";
import { insertRows } from "../platform/json-rows.ts";
import { getNdjsonGz, mergeById, putNdjsonGz } from "../platform/ndjson-archive.ts";
import { priceHistory, products } from "../platform/tables.ts";
import { DAY_MS } from "../platform/time.ts";

/**
 * Price history older than a few days leaves D1 for R2 (docs/scale.md): one gzip NDJSON object per
 * product and calendar year (of observed_at; see firstArchiveYear), so a product's year is one or two reads and never
 * another product's rows. The cron picks the products whose oldest row in D1 is HISTORY_ARCHIVE_AFTER_MS
 * old and moves every row of theirs older than HISTORY_IN_D1_MS: each product's objects are rewritten
 * about once per (after − keep), not once per change. A step writes R2 first, merging by row id (so
 * writing the same rows again changes nothing), then deletes those rows from D1 in the batch that folds them into their
 * offers' days (offer_price_days, what the alert windows read instead of these objects): a crash between the two
 * leaves rows in both places, which readers merge by id, and the next run moves them again (folding a row into its day
 * twice changes nothing either).
 */

/**
 * An offer's days older than OFFER_DAYS_KEPT_MS are folded into the offer's far row (offer_price_far: its suffix
 * extremes by day, src/alerts/windows.ts foldDays), so D1 holds about a month of days and one row per offer, not a
 * year of days. Folded prices go once no window can reach them (the longest window from the oldest change the feed holds).
 */
const FOLDED_KEPT_MS = RETENTION_MS + (MAX_WINDOW_DAYS + 1) * DAY_MS;
/** Offers whose old days one run folds: ≈ 2.9 million a day, above the ≈ 1.7 million days the model's load writes. */
const OFFERS_FOLDED_PER_RUN = 2000;

export type ArchivedHistoryRow = Omit<typeof priceHistory.$inferSelect, "productId">;

export const historyKey = (productId: string, year: string) => `history/${encodeURIComponent(productId)}/${year}.ndjson.gz`;

/**
 * The first year a product's archive has an object for: the year before its creation. A row observed
 * earlier still (a back-filled history) is kept in that first object, so a read knows every year to ask for.
 */
export const firstArchiveYear = (createdAt: string) => Number(createdAt.slice(0, 4)) - 1;
const archiveYear = (observedAt: string, createdAt: string) =>
  String(Math.max(Number(observedAt.slice(0, 4)), firstArchiveYear(createdAt)));

/** The archived rows of one product-year, oldest first (observed_at, then id); none when there is no object. */
export function readHistoryYear(bucket: R2Bucket, productId: string, year: string): Promise<ArchivedHistoryRow[]> {
  return getNdjsonGz<ArchivedHistoryRow>(bucket, historyKey(productId, year));
}

const byTime = (a: ArchivedHistoryRow, b: ArchivedHistoryRow) =>
  a.observedAt < b.observedAt ? -1 : a.observedAt > b.observedAt ? 1 : a.id - b.id;

/** Rows in both places (a crash between write and delete, or a read racing a move) count once. */
export const mergeHistory = (...parts: readonly ArchivedHistoryRow[][]): ArchivedHistoryRow[] => mergeById(parts, byTime);

/**
 * Moves the due products' old history to R2, holding the task's lease (none moved when another run holds it); returns
 * the rows that left D1.
 */
export function archiveHistory(db: Database, bucket: R2Bucket, now = Date.now()): Promise<number> {
  return withCronLease(db, "history-archive", 0, async () => {
    const moved = await moveHistory(db, bucket, now);
    await foldOldDays(db, now);
    return moved;
  });
}

/** Folds the days older than OFFER_DAYS_KEPT_MS of up to OFFERS_FOLDED_PER_RUN offers into their far rows, in one batch. */
async function foldOldDays(db: Database, now: number): Promise<void> {
  const day = (ms: number) => new Date(now - ms).toISOString().slice(0, 10);
  const [through, oldest] = [day(OFFER_DAYS_KEPT_MS), day(FOLDED_KEPT_MS)];
  const d1 = db.$client;
  const { results: offers } = await d1
    .prepare("SELECT DISTINCT product_id AS p, competitor_id AS c FROM offer_price_days WHERE day < ? LIMIT ?")
    .bind(through, OFFERS_FOLDED_PER_RUN)
    .all<{ p: string; c: string }>();
  if (offers.length === 0) return;
  const json = JSON.stringify(offers);
  const [days, fars] = await d1.batch<Record<string, unknown>>([
    d1
      .prepare(
        `SELECT d.product_id AS productId, d.competitor_id AS competitorId, d.day, d.currency, d.low_minor AS lowMinor,
           d.high_minor AS highMinor, d.close_minor AS closeMinor, d.closed_at AS closedAt
         FROM json_each(?) q JOIN offer_price_days d ON d.product_id = q.value ->> 'p' AND d.competitor_id = q.value ->> 'c' AND d.day < ?`,
      )
      .bind(json, through),
    d1
      .prepare(
        `SELECT f.product_id AS productId, f.competitor_id AS competitorId, f.through, f.extremes, f.close_minor AS closeMinor,
           f.close_currency AS closeCurrency, f.closed_at AS closedAt
         FROM json_each(?) q JOIN offer_price_far f ON f.product_id = q.value ->> 'p' AND f.competitor_id = q.value ->> 'c'`,
      )
      .bind(json),
  ]);
  const key = (row: Record<string, unknown>) => `${row.productId}\u0000${row.competitorId}`;
  const farOf = new Map(
    fars!.results.map((far) => [key(far), { ...far, extremes: JSON.parse(String(far.extremes)) } as unknown as OfferFar]),
  );
  const daysOf = new Map<string, OfferDay[]>();
  for (const row of days!.results) {
    const own = daysOf.get(key(row));
    if (own) own.push(row as unknown as OfferDay);
    else daysOf.set(key(row), [row as unknown as OfferDay]);
  }
  const folded = offers.flatMap(({ p, c }) => {
    const far = foldDays(
      farOf.get(key({ productId: p, competitorId: c })),
      daysOf.get(key({ productId: p, competitorId: c })) ?? [],
      through,
      oldest,
    );
    return far ? [{ productId: p, competitorId: c, ...far }] : [];
  });
  await d1.batch([
    ...(folded.length > 0
      ? insertRows(d1, { table: offerPriceFar, rows: folded, conflict: { target: ["product_id", "competitor_id"], update: true } })
      : []),
    d1
      .prepare(
        `DELETE FROM offer_price_days WHERE (product_id, competitor_id) IN (SELECT value ->> 'p', value ->> 'c' FROM json_each(?))
           AND day < ?`,
      )
      .bind(json, through),
  ]);
}

/**
 * The rows' offers' days, one summary each, as offer_price_days keeps them; on a conflict the summaries combine
 * (lowest, highest, the later close), so folding the same rows in twice changes nothing.
 */
function foldIntoDays(d1: D1Database, rows: readonly (ArchivedHistoryRow & { productId: string })[]): D1PreparedStatement[] {
  const days = new Map<string, typeof offerPriceDays.$inferInsert>();
  for (const row of [...rows].sort(byTime)) {
    const day = row.observedAt.slice(0, 10);
    const key = JSON.stringify([row.productId, row.competitorId, day, row.currency]);
    const summary = days.get(key);
    if (!summary)
      days.set(key, {
        productId: row.productId,
        competitorId: row.competitorId,
        day,
        currency: row.currency,
        lowMinor: row.priceMinor,
        highMinor: row.priceMinor,
        closeMinor: row.priceMinor,
        closedAt: row.observedAt,
      });
    else
      Object.assign(summary, {
        lowMinor: Math.min(summary.lowMinor, row.priceMinor),
        highMinor: Math.max(summary.highMinor, row.priceMinor),
        closeMinor: row.priceMinor,
        closedAt: row.observedAt,
      });
  }
  if (days.size === 0) return [];
  return insertRows(d1, {
    table: offerPriceDays,
    rows: [...days.values()],
    conflict: {
      target: ["product_id", "competitor_id", "day", "currency"],
      update: `low_minor = min(low_minor, excluded.low_minor), high_minor = max(high_minor, excluded.high_minor),
        close_minor = CASE WHEN excluded.closed_at >= closed_at THEN excluded.close_minor ELSE close_minor END,
        closed_at = max(closed_at, excluded.closed_at)`,
    },
  });
}

async function moveHistory(db: Database, bucket: R2Bucket, now: number): Promise<number> {
  const due = new Date(now - HISTORY_ARCHIVE_AFTER_MS).toISOString();
  const keep = new Date(now - HISTORY_IN_D1_MS).toISOString();
  // The oldest rows first (the primary key's order, which is commit order), due ones picked here rather than in SQL:
  // a WHERE on observed_at would walk the whole table by id whenever none is due. A row back-filled long after its
  // time waits behind the rows committed before it (at most HISTORY_ARCHIVE_AFTER_MS). Several rows of one product count once.
  const oldest = await db
    .select({ productId: priceHistory.productId, observedAt: priceHistory.observedAt })
    .from(priceHistory)
    .orderBy(asc(priceHistory.id))
    .limit(4 * HISTORY_ARCHIVE_PRODUCTS_PER_RUN);
  const productIds = [...new Set(oldest.filter((row) => row.observedAt < due).map((row) => row.productId))].slice(
    0,
    HISTORY_ARCHIVE_PRODUCTS_PER_RUN,
  );
  if (productIds.length === 0) return 0;
  const rows = await db
    .select({ ...getTableColumns(priceHistory), createdAt: products.createdAt })
    .from(priceHistory)
    .innerJoin(products, eq(products.id, priceHistory.productId))
    .where(
      and(
        sql`${priceHistory.productId} IN (SELECT value FROM json_each(${JSON.stringify(productIds)}))`,
        lt(priceHistory.observedAt, keep),
      ),
    );
  const groups = new Map<string, { productId: string; year: string; rows: ArchivedHistoryRow[] }>();
  for (const { productId, createdAt, ...row } of rows) {
    const year = archiveYear(row.observedAt, createdAt);
    const key = historyKey(productId, year);
    if (!groups.has(key)) groups.set(key, { productId, year, rows: [] });
    groups.get(key)!.rows.push(row);
  }
  const limit = pLimit(MAX_OPEN_CONNECTIONS);
  const written = await Promise.allSettled(
    [...groups.values()].map((group) =>
      limit(async () => {
        const merged = mergeHistory(await readHistoryYear(bucket, group.productId, group.year), group.rows);
        await putNdjsonGz(bucket, historyKey(group.productId, group.year), merged);
        return group.rows.map((row) => ({ ...row, productId: group.productId }));
      }),
    ),
  );
  // Only rows now safely in R2 leave D1, folded into their days in the same batch; a failed group's rows stay for the next run.
  const moved = written.flatMap((result) => (result.status === "fulfilled" ? result.value : []));
  if (moved.length > 0)
    await db.$client.batch([
      ...foldIntoDays(db.$client, moved),
      db.$client
        .prepare("DELETE FROM price_history WHERE id IN (SELECT value FROM json_each(?))")
        .bind(JSON.stringify(moved.map((row) => row.id))),
    ]);
  const failed = written.find((result): result is PromiseRejectedResult => result.status === "rejected");
  if (failed) throw failed.reason;
  return moved.length;
}
