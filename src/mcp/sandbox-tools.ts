import { summariseIn } from "../catalogue/converted.ts";
import { unknownProduct } from "../catalogue/history.ts";
import { type CatalogueStore, conversionOf } from "../catalogue/service.ts";
import { summarise } from "../catalogue/views.ts";
import type { FeedEvent } from "../events/schema.ts";
import type { Database } from "../platform/db.ts";
import { sandboxBase } from "../sandbox/catalogue.ts";
import { productState } from "../sandbox/overlay.ts";
import { sandboxCatalogue, sandboxCompetitors, sandboxProductHistory, sandboxProductJson } from "../sandbox/reads.ts";
import { type AccountSandbox, sandboxFeed } from "../sandbox/stub.ts";
import type { ToolData } from "./tool-data.ts";
import { productMatch, recentChangesQuery } from "./tools.ts";

/**
 * The tools' data for a test key: its account's sandbox, read as GET /products and the feed read it for a test key
 * (src/sandbox/reads.ts, sandboxFeed). A search looks through the sandbox's 1,000 products in memory, after one read
 * of the account's changes: what it reads does not grow with the live catalogue.
 */
export function sandboxToolData({ db, catalogue }: { db: Database; catalogue: CatalogueStore }, sandbox: AccountSandbox): ToolData {
  return {
    async searchProducts(input) {
      const [{ base, overlay }, conversion] = await Promise.all([
        sandboxCatalogue(sandbox),
        conversionOf({ db, catalogue }, input.currency),
      ]);
      const text = input.query?.toLowerCase();
      const same = (value: string | null, wanted: string | undefined) =>
        wanted === undefined || value?.toLowerCase() === wanted.toLowerCase();
      const found = base.products
        .map((_, index) => productState(base, overlay, index))
        .filter(
          ({ product, offers }) =>
            (input.sku === undefined || product.sku === input.sku) &&
            (text === undefined || [product.name, product.brand ?? "", product.sku].some((field) => field.toLowerCase().includes(text))) &&
            same(product.brand, input.brand) &&
            same(product.category, input.category) &&
            (input.competitor === undefined || offers.some((offer) => offer.competitorId === input.competitor)),
        )
        .sort((a, b) => (a.product.id < b.product.id ? -1 : 1));
      return {
        products: found.slice(0, input.limit).map(({ product, offers }) => {
          return productMatch(product, conversion ? summariseIn(offers, conversion) : summarise(offers));
        }),
        truncated: found.length > input.limit,
      };
    },
    async getProduct(input) {
      const index = input.id === undefined ? sandboxBase().bySku.get(input.sku!) : undefined;
      if (input.id === undefined && index === undefined) throw unknownProduct(`sku ${input.sku}`);
      const id = input.id ?? sandboxBase().products[index!]!.id;
      return JSON.parse(await sandboxProductJson(sandbox, id, await conversionOf({ db, catalogue }, input.currency)));
    },
    history: (productId, query) => sandboxProductHistory(sandbox, productId, query),
    competitors: async () => ({ competitors: await sandboxCompetitors(sandbox) }),
    recentChanges: (input) => sandboxFeed<FeedEvent>(sandbox, recentChangesQuery(input), { newestFirst: true }),
  };
}
