import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { changedQuery, filterSet, idQueries, pageQueries, sqliteSpellings } from "../../src/catalogue/filtered.ts";
import type { ProductFilters, ProductView } from "../../src/catalogue/schema.ts";
import { filteredProducts } from "../../src/catalogue/service.ts";
import type { Manifest } from "../../src/catalogue/snapshot/manifest.ts";
import { readManifest, readPointer } from "../../src/catalogue/snapshot/manifest.ts";
import { database } from "../../src/platform/db.ts";
import { products } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { type BulkProduct, buildCatalogue, createCompetitor, insertProductRows, publishCatalogue } from "../helpers/catalogue-factory.ts";
import { oneGzipMember, rawGet } from "../helpers/gzip-member.ts";
import { call, utf8Text } from "../helpers/http.ts";

// A catalogue of random ids (as production has) over three segments, with brands and categories in
// several cases and scripts, shares of 1 % and 10 %, scattered updated_at and offers.
const PRODUCTS = 2500;
const BRANDS = ["Sony", "SONY", "sony", "Nestlé", "NESTLÉ", "Ökö", "ÖKÖ", "acme", null, "\u212Aettle"];
const db = () => database(env.DB);
let key: string;

const randomHex = (bytes: number) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
const pick = <T>(items: readonly T[]) => items[Math.floor(Math.random() * items.length)]!;

async function insertRandomProducts(count: number) {
  const rows: BulkProduct[] = Array.from({ length: count }, (_, i) => ({
    id: `prd_${randomHex(16)}`,
    sku: `RND-${i}-${randomHex(3)}`,
    name: `Produkt ${i} “${pick(["Ünïcødé", "plain", "🚀 rocket"])}”`,
    brand: i % 100 === 7 ? "Rare Brand" : pick(BRANDS),
    category: i % 100 === 3 ? "Drones" : i % 10 === 5 ? "Kettles" : pick(["Toasters", "TOASTERS", "Café", "CAFÉ"]),
    updated_at: new Date(Date.UTC(2026, 0, 1) + Math.floor(Math.random() * 300 * 86_400_000)).toISOString(),
    offers: ["cmp_a", "cmp_b", "cmp_c"]
      .filter(() => Math.random() < 0.4)
      .map((competitor_id) => ({ competitor_id, price_minor: Math.floor(Math.random() * 100_000) })),
  }));
  await insertProductRows(rows);
}

const get = (path: string, headers: Record<string, string> = {}) => call("GET", `/products${path}`, { token: key, headers });
const listBody = (lines: readonly string[]) => `{"products":[${lines.join(",")}]}`;
const ndjsonBody = (lines: readonly string[]) => lines.map((line) => `${line}\n`).join("");

/** The unfiltered list's products (one JSON text each, in id order): what every filtered body is cut from. */
async function unfiltered(): Promise<string[]> {
  const body = await utf8Text(await get("", { Accept: "application/x-ndjson" }));
  return body.split("\n").slice(0, -1);
}

const currentManifest = async (): Promise<Manifest> => readManifest(env.CATALOGUE, (await readPointer(env.CATALOGUE))!.manifest);

/** The filtered body read straight from the service, with a bucket that counts its reads. */
async function readDirect(filters: ProductFilters, d1Limit?: number) {
  const reads: string[] = [];
  const bucket = new Proxy(env.CATALOGUE, {
    get(target, name) {
      if (name === "get")
        return (key: string, ...rest: []) => {
          reads.push(key);
          return target.get(key, ...rest);
        };
      const value = Reflect.get(target, name) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  let body = "";
  const decoder = new TextDecoder();
  for await (const chunk of filteredProducts(
    db(),
    bucket,
    await currentManifest(),
    { filters, form: "ndjson" },
    d1Limit === undefined ? {} : { d1Limit },
  ))
    body += decoder.decode(chunk, { stream: true });
  return { lines: body.split("\n").slice(0, -1), reads };
}

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  for (const id of ["cmp_a", "cmp_b", "cmp_c", "cmp_idle"]) await createCompetitor({ id, name: `Shop ${id} ✓` });
  await insertRandomProducts(PRODUCTS);
  await publishCatalogue();
});

const lower = (value: string | null) => value?.toLowerCase();
const FILTERS: [string, ProductFilters, (p: ProductView) => boolean][] = [
  ["sku", { sku: "RND-17" }, (p) => p.sku === "RND-17"],
  ["competitor", { competitor: "cmp_b" }, (p) => p.offers.some((o) => o.competitor_id === "cmp_b")],
  ["competitor without offers", { competitor: "cmp_idle" }, () => false],
  ["brand, another case", { brand: "SoNy" }, (p) => lower(p.brand) === "sony"],
  ["brand, non-ASCII in both cases", { brand: "nestlé" }, (p) => lower(p.brand) === "nestlé"],
  ["brand, all non-ASCII letters upper", { brand: "ökö" }, (p) => lower(p.brand) === "ökö"],
  ["brand spelled with the Kelvin sign", { brand: "kettle" }, (p) => lower(p.brand) === "kettle"],
  ["brand of 1 %", { brand: "rare brand" }, (p) => p.brand === "Rare Brand"],
  ["category of 10 %", { category: "KETTLES" }, (p) => p.category === "Kettles"],
  ["category, non-ASCII", { category: "café" }, (p) => lower(p.category) === "café"],
  ["category matching nothing", { category: "Nothing" }, () => false],
  ["updated_since", { updated_since: "2026-10-01" }, (p) => p.updated_at >= "2026-10-01T00:00:00.000Z"],
  ["updated_since with a time", { updated_since: "2026-06-15T12:30:00+02:00" }, (p) => p.updated_at >= "2026-06-15T10:30:00.000Z"],
  [
    "brand, category, competitor and updated_since",
    { brand: "sony", category: "toasters", competitor: "cmp_a", updated_since: "2026-03-01" },
    (p) =>
      lower(p.brand) === "sony" &&
      lower(p.category) === "toasters" &&
      p.offers.some((o) => o.competitor_id === "cmp_a") &&
      p.updated_at >= "2026-03-01T00:00:00.000Z",
  ],
  ["sku and brand", { sku: "RND-17", brand: "none such" }, () => false],
];

const query = (filters: ProductFilters) => `?${new URLSearchParams(filters as Record<string, string>)}`;

describe("filtered GET /products: exactly the unfiltered list's products that match", () => {
  it.each(FILTERS)(
    "%s: JSON, NDJSON and their gzip forms (one gzip member each), the same bytes per product in id order",
    async (_, filters, keep) => {
      const expected = (await unfiltered()).filter((line) => keep(JSON.parse(line) as ProductView));
      const json = await get(query(filters));
      expect(json.status).toBe(200);
      expect(await json.text()).toBe(listBody(expected));
      expect(await utf8Text(await get(query(filters), { Accept: "application/x-ndjson" }))).toBe(ndjsonBody(expected));
      const gzip = await rawGet(`/products${query(filters)}`, key, { "Accept-Encoding": "gzip" });
      expect(gzip.headers.get("Content-Encoding")).toBe("gzip");
      expect(oneGzipMember(new Uint8Array(await gzip.arrayBuffer()))).toBe(listBody(expected));
      const ndjsonGzip = await rawGet(`/products${query(filters)}`, key, { "Accept-Encoding": "gzip", Accept: "application/x-ndjson" });
      expect(oneGzipMember(new Uint8Array(await ndjsonGzip.arrayBuffer()))).toBe(ndjsonBody(expected));
    },
  );

  it.each(FILTERS)("%s: read from D1 pages and from the segments, the same products", async (_, filters, keep) => {
    const expected = (await unfiltered()).filter((line) => keep(JSON.parse(line) as ProductView));
    const fromD1 = await readDirect(filters, PRODUCTS);
    const fromSegments = await readDirect(filters, 0);
    expect(fromD1.lines).toEqual(expected);
    expect(fromSegments.lines).toEqual(expected);
    expect(fromD1.reads).toEqual([]); // nothing changed since the snapshot: no segment read
  });

  it("a filter matching nothing reads no segment", async () => {
    for (const filters of [{ category: "Nothing" }, { competitor: "cmp_idle" }, { sku: "NOPE" }, { updated_since: "2030-01-01" }]) {
      const { lines, reads } = await readDirect(filters);
      expect(lines).toEqual([]);
      expect(reads).toEqual([]);
    }
  });

  it("each filter set has its own ETag; If-None-Match answers 304", async () => {
    const etags = new Set<string>();
    for (const [, filters] of FILTERS) {
      const res = await get(query(filters));
      await res.arrayBuffer();
      const etag = res.headers.get("ETag")!;
      expect(res.headers.get("Cache-Control")).toBe("private, no-cache");
      etags.add(etag);
      const cached = await get(query(filters), { "If-None-Match": etag });
      expect(cached.status).toBe(304);
    }
    expect(etags.size).toBe(FILTERS.length);
  });
});

describe("while D1 is ahead of the snapshot", () => {
  it("a filtered body is still the snapshot's (its ETag names the snapshot), until the next build serves the change", async () => {
    const filters = { brand: "sony" };
    const before = await readDirect(filters, PRODUCTS);
    const etag = (await get(query(filters))).headers.get("ETag")!;
    // Ingestion-like writes the builder has not seen yet: one product leaves the brand, one joins it, one's price moves.
    const [leaving, joining, repriced] = await db()
      .select({ id: products.id, brand: products.brand })
      .from(products)
      .where(sql`lower(brand) = 'sony' OR brand = 'acme'`)
      .orderBy(sql`random()`)
      .limit(40)
      .then((rows) => [
        rows.find((r) => r.brand !== "acme")!,
        rows.find((r) => r.brand === "acme")!,
        rows.filter((r) => r.brand !== "acme")[1]!,
      ]);
    await env.DB.batch([
      env.DB.prepare("UPDATE catalogue_state SET version = version + 1"),
      env.DB.prepare("UPDATE products SET brand = 'Other', changed_version = (SELECT version FROM catalogue_state) WHERE id = ?").bind(
        leaving!.id,
      ),
      env.DB.prepare("UPDATE products SET brand = 'Sony', changed_version = (SELECT version FROM catalogue_state) WHERE id = ?").bind(
        joining!.id,
      ),
      env.DB.prepare("UPDATE offers SET price_minor = price_minor + 1 WHERE product_id = ?").bind(repriced!.id),
      env.DB.prepare("UPDATE products SET changed_version = (SELECT version FROM catalogue_state) WHERE id = ?").bind(repriced!.id),
    ]);
    const ahead = await readDirect(filters, PRODUCTS);
    expect(ahead.lines).toEqual(before.lines);
    expect(ahead.reads.length).toBeGreaterThan(0); // the changed products' segments
    expect((await readDirect(filters, 0)).lines).toEqual(before.lines);
    expect((await get(query(filters), { "If-None-Match": etag })).status).toBe(304);

    await buildCatalogue();
    const after = await readDirect(filters, PRODUCTS);
    expect(after.lines).toEqual((await unfiltered()).filter((line) => lower((JSON.parse(line) as ProductView).brand) === "sony"));
    expect(after.lines.some((line) => line.includes(joining!.id))).toBe(true);
    expect(after.lines.some((line) => line.includes(leaving!.id))).toBe(false);
    expect(after.reads).toEqual([]);
    expect((await get(query(filters), { "If-None-Match": etag })).status).toBe(200);
  });
});

describe("the queries D1 runs", () => {
  const run = async (query: { toSQL(): { sql: string; params: unknown[] } }) => {
    const { sql: text, params } = query.toSQL();
    const plan = await env.DB.prepare(`EXPLAIN QUERY PLAN ${text}`)
      .bind(...params)
      .all<{ detail: string }>();
    const result = await env.DB.prepare(text)
      .bind(...params)
      .all();
    return { plan: plan.results.map((row) => row.detail).join("; "), rows: result.results.length, read: result.meta.rows_read };
  };

  it("read each filter's range from an index, rows read about the rows returned (most rows do not match)", async () => {
    const queries = idQueries(
      db(),
      filterSet({ brand: "Rare Brand", category: "drones", competitor: "cmp_c", updated_since: "2026-10-20" }),
      10_000,
    );
    const indexes = {
      brand: "products_brand",
      category: "products_category",
      competitor: "offers_competitor",
      since: "products_updated_at",
    };
    for (const [name, index] of Object.entries(indexes)) {
      const { plan, rows, read } = await run(queries[name as keyof typeof queries]!);
      expect(plan, name).toContain(`INDEX ${index} (`);
      expect(plan, name).not.toMatch(/SCAN|TEMP B-TREE/);
      expect(rows, name).toBeGreaterThan(0);
      expect(rows, name).toBeLessThan(PRODUCTS / 2);
      expect(read, name).toBeLessThanOrEqual(rows + 1);
    }
    const sku = await run(idQueries(db(), filterSet({ sku: "RND-17" }), 10_000).sku!);
    expect(sku.plan).toContain("INDEX products_sku_unique (sku=?)");
    expect(sku.read).toBeLessThanOrEqual(1);
  });

  it("at most limit + 1 ids, however many match", async () => {
    const { rows, read } = await run(idQueries(db(), filterSet({ category: "toasters" }), 10).category!);
    expect(rows).toBe(11);
    expect(read).toBeLessThanOrEqual(11);
  });

  it("a page reads its products and their offers by primary key, and the changed products from their index", async () => {
    const ids = (await db().select({ id: products.id }).from(products).where(sql`lower(brand) = 'rare brand'`)).map((row) => row.id).sort();
    const manifest = await currentManifest();
    const [productQuery, offerQuery] = pageQueries(db(), ids, manifest.version);
    const page = await run(productQuery);
    expect(page.plan).toMatch(/SEARCH products USING INDEX sqlite_autoindex_products_1 \(id=\?\)/);
    expect(page.rows).toBe(ids.length);
    // Each id is read from json_each, then looked up: a few rows per product, none of the others.
    expect(page.read).toBeLessThanOrEqual(ids.length * 3);
    const offerRows = await run(offerQuery);
    expect(offerRows.plan).toMatch(/SEARCH offers USING INDEX sqlite_autoindex_offers_1 \(product_id=\?\)/);
    expect(offerRows.read).toBeLessThanOrEqual(offerRows.rows + ids.length * 3);
    const changed = await run(changedQuery(db(), manifest.version, "", null, true));
    expect(changed.plan).toContain("INDEX products_changed_version (changed_version>?)");
    expect(changed.read).toBeLessThanOrEqual(1);
    // A page's id range too: reading the range's products instead would cost a pass over the
    // catalogue per response (at 1,000,000 products, most of a 1 % filter's time).
    const paged = await run(changedQuery(db(), manifest.version, ids[0]!, ids.at(-1)!, true));
    expect(paged.plan).toContain("INDEX products_changed_version (changed_version>?)");
    expect(paged.read).toBeLessThanOrEqual(1);
    // With many changes pending, the page's id range: rows read are the range's, not every pending change's.
    const ranged = await run(changedQuery(db(), manifest.version, ids[0]!, ids[1]!, false));
    expect(ranged.plan).toContain("INDEX sqlite_autoindex_products_1 (id>? AND id<?)");
  });

  it("spells a lowercase value as SQLite's lower() may have left it", () => {
    expect(sqliteSpellings("sony")).toEqual(["sony"]);
    expect(sqliteSpellings("nestlé")).toEqual(["nestlé", "nestlÉ"]);
    expect(sqliteSpellings("kettle")).toEqual(["kettle", "\u212Aettle"]);
    expect(sqliteSpellings("ééééé")).toBeNull();
  });
});
