import { and, eq, inArray, type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { z } from "zod";
import { type Conversion, convertProductJson, summariseIn } from "../catalogue/converted.ts";
import { filterSet, matchingProducts } from "../catalogue/filtered.ts";
import { type HistoryPage, unknownProduct } from "../catalogue/history.ts";
import { type HistoryQuery, historyQuery, type ProductView, productsQuery } from "../catalogue/schema.ts";
import { type CatalogueStore, conversionOf, productJson, servingManifest } from "../catalogue/service.ts";
import { summarise } from "../catalogue/views.ts";
import { eventsQuery } from "../events/query.ts";
import { listEventsNewestFirst } from "../events/service.ts";
import type { Database } from "../platform/db.ts";
import { offers, products } from "../platform/tables.ts";
import { DAY_MS } from "../platform/time.ts";
import { holdsText, matchedProduct, textMatches } from "./search-text.ts";

/**
 * What the MCP tools do, as plain functions over the same services the REST routes call. Their inputs
 * are the REST routes' own zod fields (the filters of GET /products, the query of
 * GET /products/:id/history and GET /events), so a value one refuses the other refuses too.
 */

export interface ToolDeps {
  db: Database;
  /** Events and price history that left D1. */
  archive: R2Bucket;
  catalogue: CatalogueStore;
}

const { sku, competitor, brand, category, currency } = productsQuery.shape;
const convertInto = currency.describe(
  "Convert into this currency (ISO-4217, as ?currency=): prices from the latest rates on or before today; offers without a rate are left out of the summary",
);
const limit = (most: number, fallback: number) =>
  z
    .int({ error: `must be a whole number from 1 to ${most}` })
    .min(1, { error: `must be from 1 to ${most}` })
    .max(most, { error: `must be from 1 to ${most}` })
    .default(fallback);

export const searchProductsInput = {
  query: z
    .string()
    .refine((text) => !/\p{Cc}/u.test(text), { error: "must not contain control characters (a NUL, a tab, a line break)" })
    // Counted in code points, as the trigram tokenizer counts. The index holds pieces of three characters: a shorter
    // text could only be looked for by reading every product.
    .refine((text) => [...text].length >= 3 && [...text].length <= 200, { error: "must be 3 to 200 characters" })
    // \p{Cc} is U+0000–U+001F and U+007F–U+009F: spelled out, so that a client in any language compiles the pattern.
    .meta({ minLength: 3, maxLength: 200, pattern: "^[^\\u0000-\\u001F\\u007F-\\u009F]*$" })
    .optional()
    .describe("Text to find in the product's name, brand or SKU (case-insensitive), 3 to 200 characters, no control characters"),
  brand: brand.describe("Brand, case-insensitive (as GET /products?brand=)"),
  category: category.describe("Category, case-insensitive (as GET /products?category=)"),
  competitor: competitor.describe("Only products with an offer from this competitor id"),
  sku: sku.describe("Exactly this SKU"),
  limit: limit(100, 20).describe("At most this many products (1 to 100, default 20)"),
  currency: convertInto,
};

export const getProductInput = {
  id: z.string().min(1).max(200).optional().describe("The product's id (prd_…)"),
  sku: sku.describe("The product's SKU"),
  currency: convertInto,
};

const history = historyQuery.shape;
export const priceHistoryInput = {
  product_id: z.string().min(1).max(200).describe("The product's id (prd_…)"),
  competitor: history.competitor,
  from: history.from,
  to: history.to,
  points: z
    .int()
    .min(2)
    .max(500)
    .optional()
    .describe("Downsample each competitor's series to at most this many points (2 to 500), keeping its first and last"),
};

const events = eventsQuery.shape;
export const recentChangesInput = {
  after: events.after.describe(
    "Events older than this one: the next_cursor of the previous page (an event older than 30 days or unknown is refused)",
  ),
  since: events.since.describe("Events at or after this instant (ISO-8601); the last 24 hours by default"),
  type: events.type,
  limit: limit(100, 20).describe("At most this many events (1 to 100, default 20)"),
};

export interface ProductMatch {
  id: string;
  sku: string;
  name: string;
  brand: string | null;
  category: string | null;
  min_price: string | null;
  currency: string | null;
  offer_count: number;
}

export type SearchInput = z.output<z.ZodObject<typeof searchProductsInput>>;
export type RecentChangesInput = z.output<z.ZodObject<typeof recentChangesInput>>;

const sameText = (column: SQLiteColumn, value: string | undefined) =>
  value === undefined ? undefined : sql`lower(${column}) = lower(${value})`;

/** The filters besides a SKU that a search can read its products through, in the usual order from narrow to wide. */
const DRIVING_FILTERS = ["query", "brand", "category", "competitor"] as const;
type DrivingFilter = "sku" | (typeof DRIVING_FILTERS)[number];

/**
 * At most `limit` products of one filter (none: the first products), read through that filter's index in the
 * index's order, so the read follows the answer, not the catalogue; the other filters are checked on those
 * products only: `matches` here for the text, brand and category, the competitor on the offers read next.
 */
function productsThrough(db: Database, driver: DrivingFilter | undefined, { query, brand, category, competitor, sku, limit }: SearchInput) {
  const checked =
    and(
      query === undefined || driver === "query" ? undefined : holdsText(query),
      sameText(products.brand, brand),
      sameText(products.category, category),
    ) ?? sql`1`;
  const columns = {
    id: products.id,
    sku: products.sku,
    name: products.name,
    brand: products.brand,
    category: products.category,
    // Named: D1 answers a batch's rows as objects, and an unnamed `1` column would be an integer key, listed first.
    matches: sql<0 | 1>`${checked}`.as("matches"),
  };
  const byIndex = (where: SQL) => db.select(columns).from(products).where(where).orderBy(products.id).limit(limit);
  switch (driver) {
    case "sku":
      return db.select(columns).from(products).where(eq(products.sku, sku!));
    case "query": {
      const holding = textMatches(query!, limit);
      return db.select(columns).from(holding).innerJoin(products, matchedProduct(holding));
    }
    case "brand":
      return byIndex(sameText(products.brand, brand)!);
    case "category":
      return byIndex(sameText(products.category, category)!);
    case "competitor":
      return db
        .select(columns)
        .from(offers)
        .innerJoin(products, eq(products.id, offers.productId))
        .where(eq(offers.competitorId, competitor!))
        .orderBy(offers.productId)
        .limit(limit);
    default:
      return byIndex(sql`1`);
  }
}

/**
 * The products a search examines, and whether they hold every match. A SKU is one product. Otherwise each filter
 * given reads at most `limit` of its products, in one batch: a filter with fewer than `limit` gave all of its
 * products, so the fewest of those hold every match; when every filter has more, the first of query, brand,
 * category, competitor (the usual order from narrow to wide) is examined, and more may match beyond it.
 */
async function examineProducts(
  db: Database,
  input: SearchInput,
): Promise<{ examined: Awaited<ReturnType<typeof productsThrough>>; complete: boolean }> {
  if (input.sku !== undefined) return { examined: await productsThrough(db, "sku", input), complete: true };
  const [first, ...rest] = DRIVING_FILTERS.filter((filter) => input[filter] !== undefined).map((filter) =>
    productsThrough(db, filter, input),
  );
  const reads = await db.batch([first ?? productsThrough(db, undefined, input), ...rest]);
  const [fewest] = reads.filter((read) => read.length < input.limit).sort((a, b) => a.length - b.length);
  return fewest ? { examined: fewest, complete: true } : { examined: reads[0], complete: false };
}

/**
 * search_products. Without a text query, from the catalogue snapshot as GET /products filters it (no D1 statement):
 * the first `limit` products that match, in id order, so nothing is left unexamined. With one, through D1's text
 * index (the snapshot has none): the products examineProducts reads, then one read of their offers for the
 * summaries, which also answers the competitor filter. Each read is bounded by `limit`, whatever the catalogue
 * holds. `truncated`: every filter had more than `limit` products and the others left fewer than `limit` of the
 * narrowest's, so more may match beyond them (narrow the search).
 */
export async function searchProducts(
  { db, catalogue }: Pick<ToolDeps, "db" | "catalogue">,
  input: SearchInput,
): Promise<{ products: ProductMatch[]; truncated: boolean }> {
  if (input.query === undefined)
    return { products: await snapshotSearch(catalogue, input, await conversionOf({ db, catalogue }, input.currency)), truncated: false };
  const [{ examined, complete }, conversion] = await Promise.all([
    examineProducts(db, input),
    conversionOf({ db, catalogue }, input.currency),
  ]);
  // The ids as parameters (at most 100, D1's limit a statement): two rows read a product (its id, the index seek), one an offer.
  const offerRows =
    examined.length === 0
      ? []
      : await db
          .select()
          .from(offers)
          .where(
            inArray(
              offers.productId,
              examined.map((row) => row.id),
            ),
          );
  const offersOf = (id: string) => offerRows.filter((offer) => offer.productId === id);
  const found = examined.filter(
    ({ id, matches }) =>
      matches === 1 && (input.competitor === undefined || offersOf(id).some((offer) => offer.competitorId === input.competitor)),
  );
  return {
    products: found.map(({ matches: _, ...row }) => {
      const summary = conversion ? summariseIn(offersOf(row.id), conversion) : summarise(offersOf(row.id));
      return { ...row, min_price: summary.min_price, currency: summary.currency, offer_count: summary.offer_count };
    }),
    truncated: !complete && found.length < input.limit,
  };
}

/** The snapshot's products matching the search's filters (the same as GET /products'), in id order. */
async function* snapshotMatches(catalogue: CatalogueStore, { sku, brand, category, competitor }: Omit<SearchInput, "limit">) {
  const manifest = await servingManifest(catalogue);
  const filters = filterSet({
    ...(sku !== undefined && { sku }),
    ...(brand !== undefined && { brand }),
    ...(category !== undefined && { category }),
    ...(competitor !== undefined && { competitor }),
  });
  for await (const lines of matchingProducts(catalogue.bucket, manifest, filters)) yield* lines;
}

/** A product as search_products lists it: its names and its summary's lowest price and offer count. */
export const productMatch = (
  { id, sku, name, brand, category }: Pick<ProductMatch, "id" | "sku" | "name" | "brand" | "category">,
  summary: Pick<ProductMatch, "min_price" | "currency" | "offer_count">,
): ProductMatch => ({
  id,
  sku,
  name,
  brand,
  category,
  min_price: summary.min_price,
  currency: summary.currency,
  offer_count: summary.offer_count,
});

/** The first `limit` products of the snapshot that match, as search_products lists them. */
async function snapshotSearch(catalogue: CatalogueStore, input: SearchInput, conversion: Conversion | undefined): Promise<ProductMatch[]> {
  const found: ProductMatch[] = [];
  for await (const line of snapshotMatches(catalogue, input)) {
    if (found.length === input.limit) break;
    const product = JSON.parse(conversion ? convertProductJson(line, conversion) : line) as ProductView;
    found.push(productMatch(product, product.summary));
  }
  return found;
}

export async function getProduct(
  { db, catalogue }: { db: Database; catalogue: CatalogueStore },
  input: { id?: string | undefined; sku?: string | undefined; currency?: string | undefined },
): Promise<unknown> {
  const conversion = await conversionOf({ db, catalogue }, input.currency);
  if (input.id !== undefined) return JSON.parse(await productJson(catalogue, input.id, conversion));
  for await (const line of snapshotMatches(catalogue, { sku: input.sku }))
    return JSON.parse(conversion ? convertProductJson(line, conversion) : line);
  throw unknownProduct(`sku ${input.sku}`);
}

/** Every `points`-th of n indexes, evenly spread, the first and the last always in. */
function downsample<T>(series: readonly T[], points: number): T[] {
  if (series.length <= points) return [...series];
  return Array.from({ length: points }, (_, i) => series[Math.round((i * (series.length - 1)) / (points - 1))]!);
}

/** price_history: the product's history as `read` gives it (the catalogue's or the sandbox's), downsampled when asked. */
export async function priceHistoryOf(
  read: (productId: string, query: HistoryQuery) => Promise<HistoryPage>,
  input: z.output<z.ZodObject<typeof priceHistoryInput>>,
) {
  const { truncated, ...page } = await read(input.product_id, { competitor: input.competitor, from: input.from, to: input.to });
  if (input.points === undefined) return { ...page, truncated };
  const byCompetitor = new Map<string, typeof page.history>();
  for (const entry of page.history) byCompetitor.set(entry.competitor_id, [...(byCompetitor.get(entry.competitor_id) ?? []), entry]);
  const history = [...byCompetitor.values()]
    .flatMap((series) => downsample(series, input.points!))
    .sort((a, b) => (a.observed_at < b.observed_at ? -1 : a.observed_at > b.observed_at ? 1 : 0));
  return { ...page, history, truncated };
}

export async function listCompetitors(catalogue: CatalogueStore) {
  return { competitors: (await servingManifest(catalogue)).competitors };
}

export async function recentChanges(db: Database, archive: R2Bucket, input: RecentChangesInput) {
  return listEventsNewestFirst(db, archive, recentChangesQuery(input));
}

/** recent_changes' feed query: the window holds for every page (a cursor pages back through it, to its start). */
export const recentChangesQuery = (input: RecentChangesInput) => ({
  since: input.since ?? new Date(Date.now() - DAY_MS).toISOString(),
  type: input.type,
  limit: input.limit,
  after: input.after,
});
