import { sql } from "drizzle-orm";
import { z } from "zod";
import { productHistory, unknownProduct } from "../catalogue/history.ts";
import { historyQuery, productsQuery } from "../catalogue/schema.ts";
import { type CatalogueStore, productJson, servingManifest } from "../catalogue/service.ts";
import { summarise } from "../catalogue/views.ts";
import { eventsQuery } from "../events/query.ts";
import { listEvents } from "../events/service.ts";
import type { Database } from "../platform/db.ts";
import { offers, products } from "../platform/tables.ts";
import { DAY_MS } from "../platform/time.ts";
import { textCondition } from "./search-text.ts";

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

const { sku, competitor, brand, category } = productsQuery.shape;
const limit = (most: number, fallback: number) =>
  z
    .int({ error: `must be a whole number from 1 to ${most}` })
    .min(1, { error: `must be from 1 to ${most}` })
    .max(most, { error: `must be from 1 to ${most}` })
    .default(fallback);

export const searchProductsInput = {
  query: z.string().min(1).max(200).optional().describe("Text to find in the product's name, brand or SKU (case-insensitive)"),
  brand: brand.describe("Brand, case-insensitive (as GET /products?brand=)"),
  category: category.describe("Category, case-insensitive (as GET /products?category=)"),
  competitor: competitor.describe("Only products with an offer from this competitor id"),
  sku: sku.describe("Exactly this SKU"),
  limit: limit(100, 20).describe("At most this many products (1 to 100, default 20)"),
};

export const getProductInput = {
  id: z.string().min(1).max(200).optional().describe("The product's id (prd_…)"),
  sku: sku.describe("The product's SKU"),
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

const lowerEquals = (column: string, value: string | undefined) =>
  value === undefined ? sql`1` : sql`lower(${sql.raw(column)}) = lower(${value})`;

/**
 * search_products: the filters decide in SQL (the SKU through its unique index, the text through its
 * index, textCondition); then one batch reads the matches' offers for their summary.
 */
export async function searchProducts(
  db: Database,
  input: z.output<z.ZodObject<typeof searchProductsInput>>,
): Promise<{ products: ProductMatch[] }> {
  const rows = await db
    .select({ id: products.id, sku: products.sku, name: products.name, brand: products.brand, category: products.category })
    .from(products)
    .where(
      sql`${input.sku === undefined ? sql`1` : sql`${products.sku} = ${input.sku}`}
        AND ${lowerEquals("brand", input.brand)} AND ${lowerEquals("category", input.category)}
        AND ${
          input.competitor === undefined
            ? sql`1`
            : sql`EXISTS (SELECT 1 FROM ${offers} o WHERE o.product_id = ${products.id} AND o.competitor_id = ${input.competitor})`
        }
        AND ${textCondition(input.query)}`,
    )
    .orderBy(products.name, products.id)
    .limit(input.limit);
  if (rows.length === 0) return { products: [] };
  const offerRows = await db
    .select()
    .from(offers)
    .where(sql`${offers.productId} IN (SELECT value FROM json_each(${JSON.stringify(rows.map((row) => row.id))}))`);
  return {
    products: rows.map((row) => {
      const summary = summarise(offerRows.filter((offer) => offer.productId === row.id));
      return { ...row, min_price: summary.min_price, currency: summary.currency, offer_count: summary.offer_count };
    }),
  };
}

export async function getProduct(db: Database, input: { id?: string | undefined; sku?: string | undefined }): Promise<unknown> {
  let id = input.id;
  if (id === undefined) {
    const row = await db.select({ id: products.id }).from(products).where(sql`${products.sku} = ${input.sku!}`).get();
    if (!row) throw unknownProduct(`sku ${input.sku}`);
    id = row.id;
  }
  return JSON.parse(await productJson(db, id));
}

/** Every `points`-th of n indexes, evenly spread, the first and the last always in. */
function downsample<T>(series: readonly T[], points: number): T[] {
  if (series.length <= points) return [...series];
  return Array.from({ length: points }, (_, i) => series[Math.round((i * (series.length - 1)) / (points - 1))]!);
}

export async function priceHistoryOf(db: Database, archive: R2Bucket, input: z.output<z.ZodObject<typeof priceHistoryInput>>) {
  const { truncated, ...page } = await productHistory(db, archive, input.product_id, {
    competitor: input.competitor,
    from: input.from,
    to: input.to,
  });
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

export async function recentChanges(db: Database, archive: R2Bucket, input: z.output<z.ZodObject<typeof recentChangesInput>>) {
  return listEvents(db, archive, {
    since: input.since ?? new Date(Date.now() - DAY_MS).toISOString(),
    type: input.type,
    limit: input.limit,
    after: undefined,
  });
}
