import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { forgetKeptPartIndexes, readPlan } from "../../src/catalogue/filtered.ts";
import type { ProductFilters, ProductView } from "../../src/catalogue/schema.ts";
import { filteredProducts } from "../../src/catalogue/service.ts";
import type { Manifest } from "../../src/catalogue/snapshot/manifest.ts";
import { readManifest, readPointer } from "../../src/catalogue/snapshot/manifest.ts";
import { COMPACT_READS } from "../../src/catalogue/snapshot/value-lists.ts";
import { database } from "../../src/platform/db.ts";
import { products } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { type BulkProduct, buildSnapshot, createCompetitor, insertProductRows, publishSnapshot } from "../helpers/catalogue-factory.ts";
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

/** The filtered body read straight from the service (which takes no D1 at all), with a bucket that counts its reads. */
async function readDirect(filters: ProductFilters) {
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
  for await (const chunk of filteredProducts(bucket, await currentManifest(), { filters, form: "ndjson" }))
    body += decoder.decode(chunk, { stream: true });
  return { lines: body.split("\n").slice(0, -1), reads };
}

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  for (const id of ["cmp_a", "cmp_b", "cmp_c", "cmp_idle"]) await createCompetitor({ id, name: `Shop ${id} ✓` });
  await insertRandomProducts(PRODUCTS);
  await publishSnapshot();
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

  it.each(FILTERS)("%s: read cold and warm, the same products; warm, no index read again", async (_, filters, keep) => {
    const expected = (await unfiltered()).filter((line) => keep(JSON.parse(line) as ProductView));
    forgetKeptPartIndexes();
    const cold = await readDirect(filters);
    const warm = await readDirect(filters);
    expect(cold.lines).toEqual(expected);
    expect(warm.lines).toEqual(expected);
    expect(warm.reads.filter((key) => key.endsWith(".index.json") || key.includes("/directories/"))).toEqual([]);
    // Only products are read once warm: one range per matching part at most.
    expect(warm.reads.length).toBeLessThanOrEqual(expected.length);
  });

  it("any set of filters, drawn at random from the catalogue's own values and from none: the unfiltered list's products that match", async () => {
    const all = (await unfiltered()).map((line) => ({ line, product: JSON.parse(line) as ProductView }));
    const values = <T>(of: (p: ProductView) => T | null) =>
      [...new Set(all.map(({ product }) => of(product)).filter((v) => v !== null))] as T[];
    const maybe = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined });
    const filters = fc.record(
      {
        sku: maybe(fc.constantFrom(...values((p) => p.sku), "NOPE")),
        brand: maybe(fc.constantFrom(...values((p) => p.brand), "None Such").map((b) => (b.length % 2 ? b.toUpperCase() : b))),
        category: maybe(fc.constantFrom(...values((p) => p.category), "nothing")),
        competitor: maybe(fc.constantFrom("cmp_a", "cmp_b", "cmp_c", "cmp_idle", "cmp_none")),
        updated_since: maybe(
          fc.integer({ min: Date.UTC(2025, 11, 1), max: Date.UTC(2026, 11, 1) }).map((ms) => new Date(ms).toISOString()),
        ),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(filters, async (drawn) => {
        const f = Object.fromEntries(Object.entries(drawn).filter(([, v]) => v !== undefined)) as ProductFilters;
        const keep = ({ product: p }: (typeof all)[number]) =>
          (f.sku === undefined || p.sku === f.sku) &&
          (f.brand === undefined || lower(p.brand) === f.brand.toLowerCase()) &&
          (f.category === undefined || lower(p.category) === f.category.toLowerCase()) &&
          (f.competitor === undefined || p.offers.some((o) => o.competitor_id === f.competitor)) &&
          (f.updated_since === undefined || Date.parse(p.updated_at) >= Date.parse(f.updated_since));
        const expected = all.filter(keep).map(({ line }) => line);
        expect((await readDirect(f)).lines).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });

  it("a filter matching nothing reads nothing once warm", async () => {
    for (const filters of [
      { category: "Nothing" },
      { competitor: "cmp_idle" },
      { sku: "NOPE" },
      { updated_since: "2030-01-01" },
      { brand: "none such" },
    ]) {
      await readDirect(filters);
      const { lines, reads } = await readDirect(filters);
      expect(lines).toEqual([]);
      expect(reads).toEqual([]);
    }
  });

  it("a broad filter reads whole runs of parts: at most the plan's ranges, not one per part", async () => {
    await readDirect({ updated_since: "2026-01-01" }); // the directory and part indexes, read once
    const { lines, reads } = await readDirect({ updated_since: "2026-01-01" });
    expect(lines.length).toBe(PRODUCTS);
    const manifest = await currentManifest();
    expect(reads.length).toBeLessThanOrEqual(manifest.segments.reduce((sum, segment) => sum + segment.ndjson.extents.length, 0));
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

describe("a new build", () => {
  it("serves what changed once it is built: a product that left the brand is gone, one that joined is in", async () => {
    const filters = { brand: "sony" };
    const etag = (await get(query(filters))).headers.get("ETag")!;
    const [leaving, joining] = await Promise.all([
      db().select({ id: products.id }).from(products).where(sql`lower(brand) = 'sony'`).limit(1).get(),
      db().select({ id: products.id }).from(products).where(sql`brand = 'acme'`).limit(1).get(),
    ]);
    await env.DB.batch([
      env.DB.prepare("UPDATE catalogue_state SET version = version + 1"),
      env.DB.prepare("UPDATE products SET brand = 'Other', changed_version = (SELECT version FROM catalogue_state) WHERE id = ?").bind(
        leaving!.id,
      ),
      env.DB.prepare("UPDATE products SET brand = 'Sony', changed_version = (SELECT version FROM catalogue_state) WHERE id = ?").bind(
        joining!.id,
      ),
    ]);
    const before = await readDirect(filters);
    expect(before.lines.some((line) => line.includes(leaving!.id))).toBe(true);
    await buildSnapshot();
    const after = await readDirect(filters);
    expect(after.lines).toEqual((await unfiltered()).filter((line) => lower((JSON.parse(line) as ProductView).brand) === "sony"));
    expect(after.lines.some((line) => line.includes(joining!.id))).toBe(true);
    expect(after.lines.some((line) => line.includes(leaving!.id))).toBe(false);
    expect((await get(query(filters), { "If-None-Match": etag })).status).toBe(200);
  });

  it("one brand's or one category's list through many incremental builds (prices, brands and categories changed, products new and gone): always the unfiltered list's products that match, in few reads", async () => {
    const categories = ["Toasters", "Café", "Drones", "Kettles"];
    const every = async () => (await env.DB.prepare("SELECT id FROM products").all<{ id: string }>()).results.map((row) => row.id);
    let gone: string | undefined;
    for (let build = 0; build < 24; build++) {
      const ids = await every();
      const changed = Array.from({ length: 15 }, () => pick(ids));
      const statements = [
        env.DB.prepare("UPDATE catalogue_state SET version = version + 1"),
        ...changed.map((id, k) =>
          env.DB.prepare(
            `UPDATE products SET updated_at = ?, ${k % 5 === 0 ? "brand = ?," : k % 5 === 1 ? "category = ?," : ""} changed_version = (SELECT version FROM catalogue_state) WHERE id = ?`,
          ).bind(
            new Date(Date.UTC(2026, 11, 1) + build * 60_000 + k).toISOString(),
            ...(k % 5 === 0 ? [pick(BRANDS)] : k % 5 === 1 ? [pick(categories)] : []),
            id,
          ),
        ),
      ];
      // Now and then a product goes away, and one comes back after the next build (as one left out, then whole again).
      if (build % 7 === 3) {
        gone = pick(ids);
        statements.push(
          env.DB.prepare("DELETE FROM offers WHERE product_id = ?").bind(gone),
          env.DB.prepare("DELETE FROM products WHERE id = ?").bind(gone),
        );
      }
      await env.DB.batch(statements);
      if (build % 5 === 4) await insertRandomProducts(10);
      await buildSnapshot();
      const all = await unfiltered();
      for (const filters of [{ brand: "sony" }, { brand: "rare brand" }, { category: "drones" }, { category: "café" }] as const) {
        const field = "brand" in filters ? "brand" : "category";
        const direct = await readDirect(filters);
        const value = "brand" in filters ? filters.brand : filters.category;
        expect(direct.lines, `build ${build} ${field}`).toEqual(
          all.filter((line) => lower((JSON.parse(line) as ProductView)[field]) === value),
        );
        expect(direct.reads.length).toBeLessThanOrEqual(COMPACT_READS + 1); // the directory, once per snapshot
      }
    }
  });
});

describe("the read plan", () => {
  const part = (key: string, offset: number, bytes: number) => ({
    first: `p${offset}`,
    count: 12,
    ndjson: { key, offset, bytes },
    maxUpdatedAt: "",
    brands: [],
    categories: [],
    competitors: [],
    skus: [],
    rows: [],
  });
  const parts = [part("a", 0, 10), part("a", 10, 10), part("a", 20, 100), part("a", 120, 10), part("b", 0, 10), part("a", 130, 10)];

  it("reads neighbouring wanted parts as one range, and no part it does not want while within budget", () => {
    expect(readPlan(parts, [0, 1, 3], 10)).toEqual([
      { key: "a", offset: 0, bytes: 20 },
      { key: "a", offset: 120, bytes: 10 },
    ]);
  });

  it("past its budget, joins the ranges with the fewest bytes between them, only across parts lying one after another", () => {
    expect(readPlan(parts, [0, 3, 5], 2)).toEqual([
      { key: "a", offset: 0, bytes: 130 },
      { key: "a", offset: 130, bytes: 10 },
    ]);
    expect(readPlan(parts, [0, 3, 5], 1)).toEqual([
      { key: "a", offset: 0, bytes: 130 },
      { key: "a", offset: 130, bytes: 10 },
    ]);
  });
});
