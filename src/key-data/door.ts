import type { AlertFacts } from "../alerts/match.ts";
import type { Conversion } from "../catalogue/converted.ts";
import type { HistoryPage } from "../catalogue/history.ts";
import type { CompetitorView, HistoryQuery, ProductFilters } from "../catalogue/schema.ts";
import type { ProductMatch, SearchInput } from "../catalogue/search.ts";
import type { EventsQuery } from "../events/query.ts";
import type { EventFeed } from "../events/schema.ts";
import type { Environment } from "../platform/tables.ts";

/** What GET /products asks of a list: the filters, the form, the encoding and the currency to convert to. */
interface ProductListRequest {
  filters: ProductFilters;
  form: "json" | "ndjson";
  gzip: boolean;
  conversion: Conversion | undefined;
}

/** A list's answer: its ETag, known before any of it is read, and its body, read as it streams (never for a 304). */
interface Listed {
  etag: string;
  body(): ReadableStream<Uint8Array>;
}

/**
 * The one door through which every API-key read goes: the catalogue and its events, as the key's environment has them.
 * Admission decides the environment once (it is in the key's record) and src/pipeline/key-data.ts picks the
 * implementation: the catalogue's (src/key-data/live.ts: its snapshot in R2, D1's feed, the archives) or the account's
 * sandbox (src/key-data/sandbox.ts: its object, over the shared generated base). Routes, MCP tools and the stream read
 * `c.var.keyData` and never ask which it is, so a new data route gets test mode without a branch of its own.
 */
export interface KeyData {
  readonly environment: Environment;
  /** GET /products: the products passing the filters, whole or converted. */
  productList(request: ProductListRequest): Promise<Listed>;
  /** GET /products/{id}: the product's JSON; 404 for one it does not hold. */
  productJson(id: string, conversion: Conversion | undefined): Promise<string>;
  /** MCP get_product: by id or by SKU, converted to `currency` if given. */
  getProduct(input: { id?: string | undefined; sku?: string | undefined; currency?: string | undefined }): Promise<unknown>;
  /** MCP search_products. */
  searchProducts(input: SearchInput): Promise<{ products: ProductMatch[]; truncated: boolean }>;
  /** A product's price and stock history, oldest first. */
  history(productId: string, query: HistoryQuery): Promise<HistoryPage>;
  /** The competitors and their offer counts (GET /competitors, MCP list_competitors), with the list's ETag. */
  competitors(): Promise<{ etag: string; list: readonly CompetitorView[]; json(): Uint8Array<ArrayBuffer> }>;
  /**
   * A page of the feed: oldest first (GET /events, the stream's backfill) or newest first (MCP recent_changes). `latest`
   * asks for what was just written (the stream's backfill meets its hub's pushes): the live feed then skips a replica.
   */
  feed(query: EventsQuery, options?: { newestFirst?: boolean; latest?: boolean }): Promise<EventFeed>;
  /** How far back the feed reaches: the live feed's 30 days, a sandbox's 7. */
  readonly retentionMs: number;
  /** The newest event of this feed (the stream's present, when it opens without a cursor). */
  newestEventId(): Promise<string | undefined>;
  /** What the alert rules ask about this feed's events (a stream's filters). */
  readonly facts: AlertFacts;
}
