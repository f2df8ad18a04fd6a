import { env } from "cloudflare:workers";
import { inArray, sql } from "drizzle-orm";
import { bumpCatalogueVersion } from "../../src/catalogue/service.ts";
import type { BuildReport } from "../../src/catalogue/snapshot/build-report.ts";
import { forgetManifest } from "../../src/catalogue/snapshot/read.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { database } from "../../src/platform/db.ts";
import { newId } from "../../src/platform/ids.ts";
import { parseMoney } from "../../src/platform/money.ts";
import { competitors, offers, priceHistory, products } from "../../src/platform/tables.ts";

/** Catalogue rows written straight into D1, as ingestion would leave them. Money goes in as strings. */

let sequence = 0;
/** Zero-padded, so ids sort as they were made however many files ran before in this runtime (prd_test10 < prd_test9). */
const next = () => String(++sequence).padStart(8, "0");
const db = () => database(env.DB);

export interface CompetitorInput {
  id?: string;
  name?: string;
  domain?: string | null;
}

export async function createCompetitor(input: CompetitorInput = {}) {
  const n = next();
  const row = {
    id: input.id ?? `shop-${n}`,
    name: input.name ?? `Shop ${n}`,
    domain: input.domain === undefined ? `shop-${n}.example` : input.domain,
  };
  await db().insert(competitors).values(row);
  return row;
}

interface OfferInput {
  competitor: string;
  price: string;
  currency?: string;
  regularPrice?: string;
  shipping?: string;
  previousPrice?: string;
  inStock?: boolean;
  url?: string;
  priceChangedAt?: string;
  checkedAt?: string;
}

export interface ProductInput {
  id?: string;
  sku?: string;
  name?: string;
  gtin?: string;
  mpn?: string;
  brand?: string;
  category?: string;
  url?: string;
  imageUrl?: string;
  createdAt?: string;
  updatedAt?: string;
  lastChangedAt?: string;
  offers?: OfferInput[];
}

const minor = (amount: string | undefined, currency: string) => (amount === undefined ? null : parseMoney(amount, currency));

export async function createProduct(input: ProductInput = {}) {
  const n = next();
  const product = {
    id: input.id ?? `prd_test${n}`,
    sku: input.sku ?? `SKU-${n}`,
    name: input.name ?? `Product ${n}`,
    gtin: input.gtin ?? null,
    mpn: input.mpn ?? null,
    brand: input.brand ?? null,
    category: input.category ?? null,
    url: input.url ?? null,
    imageUrl: input.imageUrl ?? null,
    createdAt: input.createdAt ?? "2026-01-01T00:00:00.000Z",
    updatedAt: input.updatedAt ?? "2026-01-01T00:00:00.000Z",
    lastChangedAt: input.lastChangedAt ?? null,
  };
  await db().insert(products).values(product);
  for (const offer of input.offers ?? []) {
    const currency = offer.currency ?? "USD";
    await db()
      .insert(offers)
      .values({
        productId: product.id,
        competitorId: offer.competitor,
        url: offer.url ?? null,
        priceMinor: parseMoney(offer.price, currency),
        regularPriceMinor: minor(offer.regularPrice, currency),
        currency,
        shippingMinor: minor(offer.shipping, currency),
        inStock: offer.inStock ?? true,
        previousPriceMinor: minor(offer.previousPrice, currency),
        priceChangedAt: offer.priceChangedAt ?? null,
        checkedAt: offer.checkedAt ?? "2026-01-02T00:00:00.000Z",
      });
  }
  return product;
}

export interface HistoryInput {
  competitor: string;
  price: string;
  currency?: string;
  inStock?: boolean;
  observedAt: string;
}

/** Written in one D1 batch (D1 caps bound parameters per statement, so one row per statement). */
export async function addHistory(productId: string, rows: HistoryInput[]) {
  const statements = rows.map((row) => {
    const currency = row.currency ?? "USD";
    return db()
      .insert(priceHistory)
      .values({
        productId,
        competitorId: row.competitor,
        priceMinor: parseMoney(row.price, currency),
        currency,
        inStock: row.inStock ?? true,
        observedAt: row.observedAt,
      });
  });
  const [first, ...rest] = statements;
  if (first) await db().batch([first, ...rest]);
}

const BULK_BRANDS = ["Sony", "acme", "Nestlé"];

/**
 * `count` products numbered from `from` (ids `prd_<8 hex digits>` in number order unless `idOf` says otherwise, SKUs `SNAP-<n>`),
 * three in four with an offer from competitor `cmp_a` or `cmp_b` (both must exist), in one D1 batch:
 * enough for catalogues of several snapshot segments. Rows go in as JSON parameters (D1 allows 100
 * bound parameters a statement).
 */
export async function insertProducts(
  from: number,
  count: number,
  changedVersion = 0,
  idOf: (i: number) => string = (i) => `prd_${i.toString(16).padStart(8, "0")}`,
) {
  const rows: BulkProduct[] = Array.from({ length: count }, (_, k) => {
    const i = from + k;
    const id = idOf(i);
    return {
      id,
      sku: `SNAP-${i}`,
      name: `Snapshot product ${i} ☕`,
      brand: BULK_BRANDS[i % 3]!,
      category: i % 5 === 0 ? "Kettles" : "Toasters",
      updated_at: `2026-0${1 + (i % 3)}-01T00:00:00.000Z`,
      changed_version: changedVersion,
      offers: i % 4 === 0 ? [] : [{ competitor_id: i % 2 ? "cmp_a" : "cmp_b", price_minor: 100 + i }],
    };
  });
  await insertProductRows(rows);
}

/** A product row and its offers, as insertProductRows writes them. */
export interface BulkProduct {
  id: string;
  sku: string;
  name: string;
  brand: string | null;
  category: string | null;
  updated_at: string;
  changed_version?: number;
  offers: { competitor_id: string; price_minor: number }[];
}

/** Products and their offers in one D1 batch, the rows as one JSON parameter each (D1 allows 100 bound parameters a statement). */
export async function insertProductRows(rows: readonly BulkProduct[]) {
  const json = JSON.stringify(rows);
  await env.DB.batch([
    env.DB.prepare(
      `INSERT INTO products (id, sku, name, brand, category, created_at, updated_at, changed_version)
       SELECT value->>'id', value->>'sku', value->>'name', value->>'brand', value->>'category', '2026-01-01T00:00:00.000Z', value->>'updated_at', coalesce(value->>'changed_version', 0) FROM json_each(?)`,
    ).bind(json),
    env.DB.prepare(
      `INSERT INTO offers (product_id, competitor_id, price_minor, currency, in_stock, checked_at)
       SELECT p.value->>'id', o.value->>'competitor_id', o.value->>'price_minor', 'USD', 1, '2026-01-02T00:00:00.000Z'
       FROM json_each(?) p, json_each(p.value->'offers') o`,
    ).bind(json),
  ]);
}

/** A price change written as ingestion writes it (version moved, product marked, one batch) but without its poke, so no alarm races the test's builds. */
export async function changePrices(skus: readonly string[]) {
  const ids = db()
    .select({ id: products.id })
    .from(products)
    .where(inArray(products.sku, [...skus]));
  await db().batch([
    db().update(offers).set({ priceMinor: sql`price_minor + 1` }).where(inArray(offers.productId, ids)),
    bumpCatalogueVersion(db()),
    db()
      .update(products)
      .set({ changedVersion: sql`(SELECT version FROM catalogue_state)` })
      .where(inArray(products.sku, [...skus])),
  ]);
}

/**
 * What ingestion does after a change (move the version, mark the changed products: here all of them),
 * then what the builder's alarm would do a moment later: build the snapshot. This isolate then
 * serves it at once.
 */
export async function publishSnapshot(): Promise<BuildReport> {
  await db().batch([
    bumpCatalogueVersion(db()),
    db().update(products).set({ changedVersion: sql`(SELECT version FROM catalogue_state WHERE id = 1)` }),
  ]);
  return buildSnapshot();
}

/** Runs the builder now (as its alarm would after an ingestion's poke) and makes this isolate see the result at once. */
export async function buildSnapshot(): Promise<BuildReport> {
  try {
    return await catalogueBuilder(env).build();
  } finally {
    forgetManifest();
  }
}

/** Ids as production makes them (src/platform/ids.ts), so products land in random segments and parts. */
export const randomProductId = () => newId("prd");
