import type { HistoryPage } from "../catalogue/history.ts";
import { productHistory } from "../catalogue/history.ts";
import type { CompetitorView, HistoryQuery } from "../catalogue/schema.ts";
import type { EventFeed } from "../events/schema.ts";
import {
  getProduct,
  listCompetitors,
  type ProductMatch,
  type RecentChangesInput,
  recentChanges,
  type SearchInput,
  searchProducts,
  type ToolDeps,
} from "./tools.ts";

/**
 * What the tools read, for the key's environment: the catalogue (liveToolData), or its account's sandbox
 * (src/mcp/sandbox-tools.ts). The tools (src/mcp/server.ts) are the same for both; only the data differs.
 */
export interface ToolData {
  searchProducts(input: SearchInput): Promise<{ products: ProductMatch[]; truncated: boolean }>;
  getProduct(input: { id?: string | undefined; sku?: string | undefined; currency?: string | undefined }): Promise<unknown>;
  history(productId: string, query: HistoryQuery): Promise<HistoryPage>;
  competitors(): Promise<{ competitors: CompetitorView[] }>;
  recentChanges(input: RecentChangesInput): Promise<EventFeed>;
}

export const liveToolData = ({ db, archive, catalogue }: ToolDeps): ToolData => ({
  searchProducts: (input) => searchProducts({ db, catalogue }, input),
  getProduct: (input) => getProduct({ db, catalogue }, input),
  history: (productId, query) => productHistory(db, archive, productId, query),
  competitors: () => listCompetitors(catalogue),
  recentChanges: (input) => recentChanges(db, archive, input),
});
