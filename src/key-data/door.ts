import type { AlertFacts } from "../alerts/match.ts";
import type { Conversion } from "../catalogue/converted.ts";
import type { HistoryPage } from "../catalogue/history.ts";
import type { CompetitorView, HistoryQuery, ProductFilters } from "../catalogue/schema.ts";
import type { ProductMatch, SearchInput } from "../catalogue/search.ts";
import type { EventsQuery } from "../events/query.ts";
import type { EventFeed } from "../events/schema.ts";
import type { RateDay } from "../fx-rates/rates.ts";
import type { Environment } from "../platform/tables.ts";
import type { ChangesCursor, ExportCursor, ExportLimits, ExportStep, HistoryCursor } from "./export-step.ts";

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
 * The environment is picked in one place, keyDataFor (src/key-data/pick.ts): the catalogue's (src/key-data/live.ts: its
 * snapshot in R2, D1's feed, the archives) or the account's sandbox (src/key-data/sandbox.ts: its object, over the
 * shared generated base). A request's is picked once admission has decided it (src/pipeline/key-data.ts, from the key's
 * record), an export's by its runner (from the export's). Routes, MCP tools, the stream and exports never ask which it
 * is, so a new data route gets test mode without a branch of its own.
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
  /** Today's reference rates (GET /fx-rates): the catalogue's published ones, which a sandbox converts with too. */
  fxRates(): Promise<RateDay | null>;
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
  /**
   * An export's first cursor (src/exports/steps.ts runs its steps): a catalogue export's pins the live snapshot
   * published now; a sandbox's reads its products in one step.
   */
  exportCatalogueStart(): Promise<ExportCursor>;
  /** A changes export's first cursor over [since, until): the feed's span (retentionMs), then a live one's price history before it. */
  exportChangesStart(span: { since: string; until: string }): Promise<ExportCursor>;
  /** One bounded step of a catalogue export: `limits.segments` of the pinned snapshot, or a sandbox's 1,000 products. */
  exportCatalogue(cursor: Extract<ExportCursor, { phase: "catalogue" }>, limits: ExportLimits): Promise<ExportStep>;
  /** One bounded step of a changes export: `limits.events` of the feed's events, or `limits.historyProducts` products' history. */
  exportChanges(cursor: ChangesCursor | HistoryCursor, limits: ExportLimits): Promise<ExportStep>;
}
