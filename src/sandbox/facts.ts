import type { AlertFacts } from "../alerts/match.ts";
import { exactAnswers } from "../alerts/windows.ts";
import { type ArchivedHistoryRow, mergeHistory } from "../catalogue/history-archive.ts";
import { baseHistory, sandboxBase } from "./catalogue.ts";
import { productState } from "./overlay.ts";
import type { AccountSandbox } from "./stub.ts";

/**
 * What the alert rules need to know about a sandbox event (src/alerts/match.ts): the product's brand and category and
 * the offer's prior prices, from the account's sandbox (the generated base and the account's own changes), so a test
 * webhook's or a test stream's rules decide as a live one's do. At most one call to the account's object each.
 */
export function sandboxFacts(sandbox: AccountSandbox): AlertFacts {
  const base = sandboxBase();
  return {
    async products(ids) {
      const known = [...new Set(ids)].filter((id) => base.byId.has(id));
      const overlay = known.length === 0 ? new Map() : await sandbox.overlay(known);
      return new Map(
        known.map((id) => {
          const { product } = productState(base, overlay, base.byId.get(id)!);
          return [id, { brand: product.brand, category: product.category }];
        }),
      );
    },
    async priorPrices(questions) {
      const productIds = [...new Set(questions.map((q) => q.p))];
      const own = new Map<string, ArchivedHistoryRow[]>();
      for (const row of await sandbox.history(productIds)) {
        const rows = own.get(row.productId);
        if (rows) rows.push(row);
        else own.set(row.productId, [row]);
      }
      // Each product's history merged once, whatever the number of questions about it.
      const rows = productIds.flatMap((productId) =>
        mergeHistory(baseHistory(base, productId), own.get(productId) ?? []).map((row) => ({ ...row, productId })),
      );
      return exactAnswers(questions, rows);
    },
  };
}

/** Each account's sandbox facts, from its object (the form src/alerts/environments.ts takes them in). */
export const sandboxFactsOf =
  (sandboxOf: (accountId: string) => AccountSandbox) =>
  (accountId: string): AlertFacts =>
    sandboxFacts(sandboxOf(accountId));
