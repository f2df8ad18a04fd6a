import { and, asc, eq, gte, lt } from "drizzle-orm";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { formatMoney } from "../platform/money.ts";
import { priceHistory, products } from "../platform/tables.ts";
import { type ArchivedHistoryRow, firstArchiveYear, mergeHistory, readHistoryYear } from "./history-archive.ts";
import type { HistoryQuery, HistoryView } from "./schema.ts";

/** History is read from D1 and the archive per request; at most this many rows per response (oldest first). */
export const HISTORY_LIMIT = 1000;

export const unknownProduct = (id: string) => new ApiError(404, `There is no product ${JSON.stringify(id)}; GET /products lists the ids.`);

export interface HistoryPage extends HistoryView {
  /** True when more than HISTORY_LIMIT rows matched and only the oldest HISTORY_LIMIT are here. */
  truncated: boolean;
}

/** The calendar years whose archive objects a query reads: from its `from` (never before the product's first object) to its `to`. */
function historyYears(query: HistoryQuery, createdAt: string, now = new Date().toISOString()): string[] {
  const first = Math.max(firstArchiveYear(createdAt), Number((query.from ?? "0").slice(0, 4)));
  const last = Number((query.to !== undefined && query.to < now ? new Date(Date.parse(query.to) - 1).toISOString() : now).slice(0, 4));
  // A span ending before the first object's year can only be in that object (back-filled rows).
  return Array.from({ length: Math.max(1, last - first + 1) }, (_, i) => String(first + i));
}

/**
 * A product's price history, oldest first, at most HISTORY_LIMIT rows: the recent days from D1 (one
 * index range), older ones from the product's own archive objects, a year each, read oldest first and
 * only until HISTORY_LIMIT rows are found. D1 is read first: a row the archiver moves meanwhile is then
 * seen twice (merged by id), never missed.
 */
export async function productHistory(db: Database, archive: R2Bucket, productId: string, query: HistoryQuery): Promise<HistoryPage> {
  const conditions = [eq(priceHistory.productId, productId)];
  if (query.competitor !== undefined) conditions.push(eq(priceHistory.competitorId, query.competitor));
  if (query.from !== undefined) conditions.push(gte(priceHistory.observedAt, query.from));
  if (query.to !== undefined) conditions.push(lt(priceHistory.observedAt, query.to));
  const [product, recent] = await db.batch([
    db.select({ createdAt: products.createdAt }).from(products).where(eq(products.id, productId)),
    db
      .select()
      .from(priceHistory)
      .where(and(...conditions))
      .orderBy(asc(priceHistory.observedAt), asc(priceHistory.id))
      .limit(HISTORY_LIMIT + 1),
  ]);
  if (product.length === 0) throw unknownProduct(productId);
  const wanted = (row: ArchivedHistoryRow) =>
    (query.competitor === undefined || row.competitorId === query.competitor) &&
    (query.from === undefined || row.observedAt >= query.from) &&
    (query.to === undefined || row.observedAt < query.to);
  const archived: ArchivedHistoryRow[] = [];
  for (const year of historyYears(query, product[0]!.createdAt)) {
    if (archived.length > HISTORY_LIMIT) break; // later years cannot be among the oldest HISTORY_LIMIT
    archived.push(...(await readHistoryYear(archive, productId, year)).filter(wanted));
  }
  const rows = mergeHistory(archived, recent);
  return {
    product_id: productId,
    history: rows.slice(0, HISTORY_LIMIT).map(historyEntryView),
    truncated: rows.length > HISTORY_LIMIT,
  };
}

/** A history row on the wire (the catalogue's and the sandbox's: src/sandbox/reads.ts). */
export const historyEntryView = (row: ArchivedHistoryRow): HistoryView["history"][number] => ({
  competitor_id: row.competitorId,
  price: formatMoney(row.priceMinor, row.currency),
  currency: row.currency,
  in_stock: row.inStock,
  observed_at: row.observedAt,
});
