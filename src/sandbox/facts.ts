import { type AlertFacts, priorAnswer } from "../alerts/match.ts";
import { type ArchivedHistoryRow, mergeHistory } from "../catalogue/history-archive.ts";
import type { Database } from "../platform/db.ts";
import { baseHistory, sandboxBase } from "./catalogue.ts";
import { productState, readOverlay } from "./overlay.ts";

/**
 * What the alert rules need to know about a sandbox event (src/alerts/match.ts): the product's brand and category and
 * the offer's prior prices, from the account's sandbox (the generated base and the account's own changes), so a test
 * webhook's or a test stream's rules decide as a live one's do. At most one D1 statement each.
 */
export function sandboxFacts(db: Database, accountId: string): AlertFacts {
  const base = sandboxBase();
  return {
    async products(ids) {
      const known = [...new Set(ids)].filter((id) => base.byId.has(id));
      const overlay = known.length === 0 ? new Map() : await readOverlay(db, accountId, known);
      return new Map(
        known.map((id) => {
          const { product } = productState(base, overlay, base.byId.get(id)!);
          return [id, { brand: product.brand, category: product.category }];
        }),
      );
    },
    async priorPrices(questions) {
      const ids = [...new Set(questions.map((q) => q.p))];
      const { results } = await db.$client
        .prepare(
          `SELECT id, product_id AS productId, competitor_id AS competitorId, price_minor AS priceMinor, currency,
             in_stock AS inStock, observed_at AS observedAt
           FROM sandbox_history WHERE account_id = ? AND product_id IN (SELECT value FROM json_each(?)) ORDER BY observed_at, id`,
        )
        .bind(accountId, JSON.stringify(ids))
        .all<ArchivedHistoryRow & { productId: string }>();
      return new Map(
        questions.map((q) => [
          q.k,
          priorAnswer(
            q,
            mergeHistory(
              baseHistory(base, q.p),
              results.filter((row) => row.productId === q.p),
            ),
          ),
        ]),
      );
    },
  };
}
