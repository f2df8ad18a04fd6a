import { and, eq, inArray, type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Database } from "../platform/db.ts";
import { offers, products } from "../platform/tables.ts";
import { type Conversion, convertProductJson, summariseIn } from "./converted.ts";
import { filterSet, matchingProducts } from "./filtered.ts";
import { unknownProduct } from "./history.ts";
import type { ProductView, SummaryView } from "./schema.ts";
import { holdsEveryWord, holdsText, matchedProduct, textMatches } from "./search-text.ts";
import { conversionOf, productJson, type SnapshotAccess, servingManifest } from "./service.ts";
import { summarise } from "./views.ts";

/**
 * The catalogue searched by its filters or by text (MCP search_products and get_product by SKU): from the snapshot
 * when no text is asked, through D1's text index when it is (every word of the text, src/catalogue/search-text.ts). Its inputs are MCP's (src/mcp/tools.ts validates them).
 */

/** What a search asks: GET /products' filters, a text, and how many products at most. */
export interface SearchInput {
  query?: string | undefined;
  brand?: string | undefined;
  category?: string | undefined;
  competitor?: string | undefined;
  sku?: string | undefined;
  limit: number;
  currency?: string | undefined;
}

export interface ProductMatch {
  id: string;
  sku: string;
  name: string;
  brand: string | null;
  category: string | null;
  /** The price to quote: the lowest offer in stock, shipping included where known (the summary's). */
  lowest_offer: SummaryView["lowest_offer"];
  min_price: string | null;
  currency: string | null;
  offer_count: number;
}

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
  { db, catalogue }: { db: Database; catalogue: SnapshotAccess },
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
  // The index found the text's words of 3 characters or more; its shorter words are checked here.
  const found = examined.filter(
    ({ id, matches, name, brand, sku }) =>
      matches === 1 &&
      holdsEveryWord(input.query!, [name, brand, sku]) &&
      (input.competitor === undefined || offersOf(id).some((offer) => offer.competitorId === input.competitor)),
  );
  return {
    products: found.map(({ matches: _, ...row }) =>
      productMatch(row, conversion ? summariseIn(offersOf(row.id), conversion) : summarise(offersOf(row.id))),
    ),
    truncated: !complete && found.length < input.limit,
  };
}

/** The snapshot's products matching the search's filters (the same as GET /products'), in id order. */
async function* snapshotMatches(catalogue: SnapshotAccess, { sku, brand, category, competitor }: Omit<SearchInput, "limit">) {
  const manifest = await servingManifest(catalogue);
  const filters = filterSet({
    ...(sku !== undefined && { sku }),
    ...(brand !== undefined && { brand }),
    ...(category !== undefined && { category }),
    ...(competitor !== undefined && { competitor }),
  });
  for await (const lines of matchingProducts(catalogue.bucket, manifest, filters)) yield* lines;
}

/** A product as search_products lists it: its names, its summary's lowest offer, lowest price and offer count. */
export const productMatch = (
  { id, sku, name, brand, category }: Pick<ProductMatch, "id" | "sku" | "name" | "brand" | "category">,
  summary: Pick<ProductMatch, "lowest_offer" | "min_price" | "currency" | "offer_count">,
): ProductMatch => ({
  id,
  sku,
  name,
  brand,
  category,
  lowest_offer: summary.lowest_offer,
  min_price: summary.min_price,
  currency: summary.currency,
  offer_count: summary.offer_count,
});

/** The first `limit` products of the snapshot that match, as search_products lists them. */
async function snapshotSearch(catalogue: SnapshotAccess, input: SearchInput, conversion: Conversion | undefined): Promise<ProductMatch[]> {
  const found: ProductMatch[] = [];
  for await (const line of snapshotMatches(catalogue, input)) {
    if (found.length === input.limit) break;
    const product = JSON.parse(conversion ? convertProductJson(line, conversion) : line) as ProductView;
    found.push(productMatch(product, product.summary));
  }
  return found;
}

export async function getProduct(
  { db, catalogue }: { db: Database; catalogue: SnapshotAccess },
  input: { id?: string | undefined; sku?: string | undefined; currency?: string | undefined },
): Promise<unknown> {
  const conversion = await conversionOf({ db, catalogue }, input.currency);
  if (input.id !== undefined) return JSON.parse(await productJson(catalogue, input.id, conversion));
  for await (const line of snapshotMatches(catalogue, { sku: input.sku }))
    return JSON.parse(conversion ? convertProductJson(line, conversion) : line);
  throw unknownProduct(`sku ${input.sku}`);
}
