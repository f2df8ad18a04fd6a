import { and, eq, getTableColumns, lt, sql } from "drizzle-orm";
import pLimit from "p-limit";
import { dayRow, farRow, foldDays, type OfferDay, type OfferFar, storedFar } from "../alerts/far-rows.ts";
import { MAX_WINDOW_DAYS } from "../alerts/schema.ts";
import { dayNumber, offerFoldCursor, offerPriceDays, offerPriceFar } from "../alerts/tables.ts";
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
import { dueOwners } from "../platform/due-owners.ts";
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
 * writing the same rows again changes nothing), then folds those rows into their offers' days (offer_price_days, what
 * the alert windows read instead of these objects, in their own database: ALERTS_DB), then deletes them from D1's
 * price_history. Three writes, none in a transaction with another, each safe to repeat, so a crash after any of them
 * loses nothing and counts nothing twice:
 * - after R2: the rows are in both places, which readers merge by id; the next run moves them again.
 * - after the days: the rows are in price_history and in their days at once. A day's fold is a combine that gives the
 *   same day however often the same rows enter it (the lowest, the highest, the close of the latest instant), so the
 *   next run folds them again harmlessly, and a window reading both meanwhile takes the extremes of the same prices.
 *   Days are written before the delete, never after: a window reads price_history first and the days second
 *   (src/alerts/windows.ts), so a row is in one read or the other.
 * - after the delete: done.
 */

/**
 * An offer's days older than OFFER_DAYS_KEPT_MS are folded into the offer's far row (offer_price_far: its suffix
 * extremes by day, src/alerts/windows.ts foldDays), so D1 holds about a month of days and one row per offer, not a
 * year of days. Folded prices go once no window can reach them (the longest window from the oldest change the feed holds).
 */
const FOLDED_KEPT_MS = RETENTION_MS + (MAX_WINDOW_DAYS + 1) * DAY_MS;
/** Offers whose old days one run folds: ≈ 2.9 million a day, above the ≈ 1.7 million days the model's load writes. */
const OFFERS_FOLDED_PER_RUN = 2000;
/**
 * Day rows one run walks past the cursor (offer_fold_cursor) to find offers with days to fold: ≈ 72 million a day, so
 * the ≈ 32 million day rows of the model's load (55 million at docs/scale.md's upper estimate) are walked within 11
 * (18) hours, and a day is folded at most that long after it passes OFFER_DAYS_KEPT_MS. No index on `day` finds them instead: its every entry would repeat the primary key
 * (src/alerts/tables.ts).
 */
const DAY_ROWS_WALKED_PER_RUN = 50_000;

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
export function archiveHistory(db: Database, alerts: Database, bucket: R2Bucket, now = Date.now()): Promise<number> {
  return withCronLease(db, "history-archive", 0, async () => {
    const moved = await moveHistory(db, alerts, bucket, now);
    await foldOldDays(alerts, now);
    return moved;
  });
}

/**
 * Walks the next DAY_ROWS_WALKED_PER_RUN day rows from the cursor, in primary key order (an offer's days oldest first),
 * and folds the days older than OFFER_DAYS_KEPT_MS of up to OFFERS_FOLDED_PER_RUN offers among them into their far
 * rows; the far rows, the days' delete and the cursor's move are one batch of the alert windows' database.
 */
async function foldOldDays(alerts: Database, now: number): Promise<void> {
  const day = (ms: number) => new Date(now - ms).toISOString().slice(0, 10);
  const [through, oldest] = [day(OFFER_DAYS_KEPT_MS), day(FOLDED_KEPT_MS)];
  const d1 = alerts.$client;
  const { results: walked } = await d1
    .prepare(
      `SELECT product_id AS p, competitor_id AS c, min(day) AS first, count(*) AS n FROM (
         SELECT product_id, competitor_id, day FROM offer_price_days
         WHERE (product_id, competitor_id) > (SELECT product_id, competitor_id FROM offer_fold_cursor WHERE id = 1 UNION ALL SELECT '', '' LIMIT 1)
         ORDER BY product_id, competitor_id, day, currency LIMIT ?)
       GROUP BY product_id, competitor_id ORDER BY product_id, competitor_id`,
    )
    .bind(DAY_ROWS_WALKED_PER_RUN)
    .all<{ p: string; c: string; first: number; n: number }>();
  // Nothing past the cursor (the rows it had reached were folded away): from the start next time, a row written only then.
  if (walked.length === 0) {
    await d1.prepare("UPDATE offer_fold_cursor SET product_id = '', competitor_id = '' WHERE id = 1 AND product_id <> ''").run();
    return;
  }
  const due = walked.filter((offer) => offer.first < dayNumber(through));
  const offers = due.slice(0, OFFERS_FOLDED_PER_RUN).map(({ p, c }) => ({ p, c }));
  // On from the last offer folded when more were due than one run folds, else from the last walked; from the start
  // again once the walk reached the end (fewer rows than it may walk).
  const reachedEnd = walked.reduce((n, offer) => n + offer.n, 0) < DAY_ROWS_WALKED_PER_RUN;
  const last = due.length > OFFERS_FOLDED_PER_RUN ? offers.at(-1)! : walked.at(-1)!;
  const cursor = reachedEnd && due.length <= OFFERS_FOLDED_PER_RUN ? { p: "", c: "" } : last;
  const moveCursor = insertRows(d1, {
    table: offerFoldCursor,
    rows: [{ id: 1, productId: cursor.p, competitorId: cursor.c }],
    conflict: { target: ["id"], update: true },
  });
  if (offers.length === 0) {
    await d1.batch(moveCursor);
    return;
  }
  const json = JSON.stringify(offers);
  const [days, fars] = await d1.batch<Record<string, unknown>>([
    d1
      .prepare(
        `SELECT d.product_id AS productId, d.competitor_id AS competitorId, d.day, d.currency, d.low_minor AS lowMinor,
           d.high_minor AS highMinor, d.close_minor AS closeMinor, d.closed_at AS closedAt
         FROM json_each(?) q JOIN offer_price_days d ON d.product_id = q.value ->> 'p' AND d.competitor_id = q.value ->> 'c' AND d.day < ?`,
      )
      .bind(json, dayNumber(through)),
    d1
      .prepare(
        `SELECT f.product_id AS productId, f.competitor_id AS competitorId, f.through, f.extremes, f.close_minor AS closeMinor,
           f.close_currency AS closeCurrency, f.closed_at AS closedAt
         FROM json_each(?) q JOIN offer_price_far f ON f.product_id = q.value ->> 'p' AND f.competitor_id = q.value ->> 'c'`,
      )
      .bind(json),
  ]);
  const key = (row: Record<string, unknown>) => `${row.productId}\u0000${row.competitorId}`;
  const farOf = new Map<string, OfferFar>(fars!.results.map((far) => [key(far), farRow(far as unknown as Parameters<typeof farRow>[0])]));
  const daysOf = new Map<string, OfferDay[]>();
  for (const row of days!.results) {
    const stored = dayRow(row as unknown as OfferDay & { day: number; closedAt: number });
    const own = daysOf.get(key(row));
    if (own) own.push(stored);
    else daysOf.set(key(row), [stored]);
  }
  const folded = offers.flatMap(({ p, c }) => {
    const far = foldDays(
      farOf.get(key({ productId: p, competitorId: c })),
      daysOf.get(key({ productId: p, competitorId: c })) ?? [],
      through,
      oldest,
    );
    return far ? [{ productId: p, competitorId: c, ...storedFar(far) }] : [];
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
      .bind(json, dayNumber(through)),
    ...moveCursor,
  ]);
}

/**
 * The rows' offers' days, one summary each, as offer_price_days keeps them; on a conflict the summaries combine
 * (lowest, highest, the later close), so folding the same rows in twice changes nothing.
 */
function foldIntoDays(d1: D1Database, rows: readonly (ArchivedHistoryRow & { productId: string })[]): D1PreparedStatement[] {
  const days = new Map<string, typeof offerPriceDays.$inferInsert>();
  for (const row of [...rows].sort(byTime)) {
    const day = dayNumber(row.observedAt);
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
        closedAt: Date.parse(row.observedAt),
      });
    else
      Object.assign(summary, {
        lowMinor: Math.min(summary.lowMinor, row.priceMinor),
        highMinor: Math.max(summary.highMinor, row.priceMinor),
        closeMinor: row.priceMinor,
        closedAt: Date.parse(row.observedAt),
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

async function moveHistory(db: Database, alerts: Database, bucket: R2Bucket, now: number): Promise<number> {
  const due = new Date(now - HISTORY_ARCHIVE_AFTER_MS).toISOString();
  const keep = new Date(now - HISTORY_IN_D1_MS).toISOString();
  const productIds = await dueOwners(
    db,
    { table: priceHistory, id: priceHistory.id, owner: priceHistory.productId, at: priceHistory.observedAt },
    { due, scan: 4 * HISTORY_ARCHIVE_PRODUCTS_PER_RUN, owners: HISTORY_ARCHIVE_PRODUCTS_PER_RUN },
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
  // Only rows now safely in R2 leave D1, folded into their days first (the alert windows' database, then the main
  // one: see the top of this file); a failed group's rows stay for the next run.
  const moved = written.flatMap((result) => (result.status === "fulfilled" ? result.value : []));
  if (moved.length > 0) {
    await alerts.$client.batch(foldIntoDays(alerts.$client, moved));
    await db.$client
      .prepare("DELETE FROM price_history WHERE id IN (SELECT value FROM json_each(?))")
      .bind(JSON.stringify(moved.map((row) => row.id)))
      .run();
  }
  const failed = written.find((result): result is PromiseRejectedResult => result.status === "rejected");
  if (failed) throw failed.reason;
  return moved.length;
}
