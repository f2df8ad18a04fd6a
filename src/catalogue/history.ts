import { and, asc, eq, gte, lt } from "drizzle-orm";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { formatMoney } from "../platform/money.ts";
import { priceHistory, products } from "../platform/tables.ts";
import type { HistoryQuery, HistoryView } from "./schema.ts";

/** History is read from D1 per request; at most this many rows per response (oldest first). */
export const HISTORY_LIMIT = 1000;

export const unknownProduct = (id: string) => new ApiError(404, `There is no product ${JSON.stringify(id)}; GET /products lists the ids.`);

export interface HistoryPage extends HistoryView {
  /** True when more than HISTORY_LIMIT rows matched and only the oldest HISTORY_LIMIT are here. */
  truncated: boolean;
}

/** A product's price history from D1, oldest first, at most HISTORY_LIMIT rows. */
export async function productHistory(db: Database, productId: string, query: HistoryQuery): Promise<HistoryPage> {
  const conditions = [eq(priceHistory.productId, productId)];
  if (query.competitor !== undefined) conditions.push(eq(priceHistory.competitorId, query.competitor));
  if (query.from !== undefined) conditions.push(gte(priceHistory.observedAt, query.from));
  if (query.to !== undefined) conditions.push(lt(priceHistory.observedAt, query.to));
  const [product, rows] = await db.batch([
    db.select({ id: products.id }).from(products).where(eq(products.id, productId)),
    db
      .select()
      .from(priceHistory)
      .where(and(...conditions))
      .orderBy(asc(priceHistory.observedAt), asc(priceHistory.id))
      .limit(HISTORY_LIMIT + 1),
  ]);
  if (product.length === 0) throw unknownProduct(productId);
  return {
    product_id: productId,
    history: rows.slice(0, HISTORY_LIMIT).map((row) => ({
      competitor_id: row.competitorId,
      price: formatMoney(row.priceMinor, row.currency),
      currency: row.currency,
      in_stock: row.inStock,
      observed_at: row.observedAt,
    })),
    truncated: rows.length > HISTORY_LIMIT,
  };
}
