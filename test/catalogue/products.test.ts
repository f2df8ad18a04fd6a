import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import type { ApiError } from "../../client/index.ts";
import type { ProductView } from "../../src/catalogue/schema.ts";
import { readManifest, readPointer, segmentIndexOf } from "../../src/catalogue/snapshot/manifest.ts";
import { forgetKeptSegments } from "../../src/catalogue/snapshot/product-read.ts";
import { freshAccount } from "../helpers/accounts.ts";
import {
  buildSnapshot,
  changePrices,
  createCompetitor,
  createProduct,
  insertProducts,
  publishSnapshot,
} from "../helpers/catalogue-factory.ts";
import { call, expectJson, randomTestIp, workMeter } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";

let key: string;
const get = <Path extends string>(path: Path, headers: Record<string, string> = {}) => call("GET", path, { token: key, headers });
const skus = (body: { products: ProductView[] }) => body.products.map((p) => p.sku).sort();

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_amazon", name: "Amazon", domain: "amazon.com" });
  await createCompetitor({ id: "cmp_walmart", name: "Walmart", domain: "walmart.com" });
  await createCompetitor({ id: "cmp_rakuten", name: "Rakuten", domain: "rakuten.co.jp" });
  await createCompetitor({ id: "cmp_gulf", name: "Gulf Shop", domain: null });
  await createProduct({
    id: "prd_headphones",
    sku: "SONY-XM5",
    name: "Sony WH-1000XM5",
    gtin: "4548736132610",
    mpn: "WH1000XM5/B",
    brand: "Sony",
    category: "Headphones",
    url: "https://www.sony.com/wh1000xm5",
    imageUrl: "https://images.example/xm5.jpg",
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-03-01T00:00:00.000Z",
    lastChangedAt: "2026-02-15T00:00:00.000Z",
    offers: [
      { competitor: "cmp_walmart", price: "15.49", inStock: false, checkedAt: "2026-03-01T00:00:00.000Z" },
      {
        competitor: "cmp_amazon",
        price: "14.99",
        regularPrice: "19.99",
        shipping: "0.00",
        previousPrice: "16.50",
        url: "https://www.amazon.com/dp/B09XS7JWHH",
        priceChangedAt: "2026-02-15T00:00:00.000Z",
        checkedAt: "2026-03-01T00:00:00.000Z",
      },
      { competitor: "cmp_rakuten", price: "1500", currency: "JPY", shipping: "300", checkedAt: "2026-03-01T00:00:00.000Z" },
    ],
  });
  await createProduct({
    sku: "APPLE-IPHONE",
    brand: "Apple",
    category: "Phones",
    updatedAt: "2026-02-01T00:00:00.000Z",
    offers: [{ competitor: "cmp_gulf", price: "1.250", currency: "BHD" }],
  });
  await createProduct({
    sku: "SONY-TV",
    brand: "sony",
    category: "TVs",
    updatedAt: "2026-01-15T00:00:00.000Z",
    offers: [{ competitor: "cmp_walmart", price: "499" }],
  });
  await createProduct({ sku: "NO-OFFERS", brand: "Acme" });
  // Multi-byte UTF-8 in the middle of the list: the byte ranges of each product must still line up.
  await createProduct({
    id: "prd_cafe",
    sku: "CAFÉ-1",
    name: "Café Crème ☕ 🚀",
    brand: "Nestlé",
    category: "Kitchen",
    offers: [{ competitor: "cmp_walmart", price: "3.20" }],
  });
  await publishSnapshot();
});

describe("GET /products", () => {
  it("returns every product with its offers, summary and exact money strings", async () => {
    const body = await expectJson(await get("/products"), 200);
    expect(skus(body)).toEqual(["APPLE-IPHONE", "CAFÉ-1", "NO-OFFERS", "SONY-TV", "SONY-XM5"]);
    const headphones = body.products.find((p) => p.sku === "SONY-XM5");
    expect(headphones).toEqual({
      id: "prd_headphones",
      sku: "SONY-XM5",
      gtin: "4548736132610",
      mpn: "WH1000XM5/B",
      name: "Sony WH-1000XM5",
      brand: "Sony",
      category: "Headphones",
      url: "https://www.sony.com/wh1000xm5",
      image_url: "https://images.example/xm5.jpg",
      offers: [
        {
          competitor_id: "cmp_amazon",
          competitor_name: "Amazon",
          url: "https://www.amazon.com/dp/B09XS7JWHH",
          price: "14.99",
          regular_price: "19.99",
          currency: "USD",
          shipping_cost: "0.00",
          total_price: "14.99",
          unit_price: null,
          lowest_price_30d: null,
          seller: null,
          condition: "new",
          in_stock: true,
          check_status: "ok",
          previous_price: "16.50",
          price_changed_at: "2026-02-15T00:00:00.000Z",
          checked_at: "2026-03-01T00:00:00.000Z",
        },
        {
          competitor_id: "cmp_rakuten",
          competitor_name: "Rakuten",
          url: null,
          price: "1500",
          regular_price: null,
          currency: "JPY",
          shipping_cost: "300",
          total_price: "1800",
          unit_price: null,
          lowest_price_30d: null,
          seller: null,
          condition: "new",
          in_stock: true,
          check_status: "ok",
          previous_price: null,
          price_changed_at: null,
          checked_at: "2026-03-01T00:00:00.000Z",
        },
        {
          competitor_id: "cmp_walmart",
          competitor_name: "Walmart",
          url: null,
          price: "15.49",
          regular_price: null,
          currency: "USD",
          shipping_cost: null,
          total_price: null,
          unit_price: null,
          lowest_price_30d: null,
          seller: null,
          condition: "new",
          in_stock: false,
          check_status: "ok",
          previous_price: null,
          price_changed_at: null,
          checked_at: "2026-03-01T00:00:00.000Z",
        },
      ],
      // Two USD offers against one JPY offer: the range is over the USD offers only.
      summary: {
        min_price: "14.99",
        max_price: "15.49",
        currency: "USD",
        offer_count: 3,
        in_stock_count: 2,
        lowest_competitor_id: "cmp_amazon",
        // In stock, in the summary's currency: Amazon's 14.99 delivered free (Rakuten's yen are compared only with ?currency=).
        lowest_offer: { competitor_id: "cmp_amazon", price: "14.99", total_price: "14.99", currency: "USD" },
      },
      created_at: "2026-01-01T00:00:00.000Z",
      updated_at: "2026-03-01T00:00:00.000Z",
      last_changed_at: "2026-02-15T00:00:00.000Z",
    });
    const phone = body.products.find((p) => p.sku === "APPLE-IPHONE")!;
    expect(phone.offers[0]).toMatchObject({ price: "1.250", currency: "BHD" });
    expect(phone.summary).toEqual({
      min_price: "1.250",
      max_price: "1.250",
      currency: "BHD",
      offer_count: 1,
      in_stock_count: 1,
      lowest_competitor_id: "cmp_gulf",
      lowest_offer: { competitor_id: "cmp_gulf", price: "1.250", total_price: null, currency: "BHD" },
    });
    const tv = body.products.find((p) => p.sku === "SONY-TV")!;
    expect(tv.offers[0]!.price).toBe("499.00");
    const none = body.products.find((p) => p.sku === "NO-OFFERS")!;
    expect(none.offers).toEqual([]);
    expect(none.summary).toEqual({
      min_price: null,
      max_price: null,
      currency: null,
      offer_count: 0,
      in_stock_count: 0,
      lowest_competitor_id: null,
      lowest_offer: null,
    });
  });

  it.each([
    ["sku=SONY-XM5", ["SONY-XM5"]],
    ["sku=UNKNOWN", []],
    ["competitor=cmp_walmart", ["CAFÉ-1", "SONY-TV", "SONY-XM5"]],
    ["brand=NESTLÉ", ["CAFÉ-1"]],
    ["sku=CAF%C3%89-1", ["CAFÉ-1"]],
    ["competitor=cmp_gulf", ["APPLE-IPHONE"]],
    ["brand=sony", ["SONY-TV", "SONY-XM5"]],
    ["brand=SONY", ["SONY-TV", "SONY-XM5"]],
    ["category=phones", ["APPLE-IPHONE"]],
    ["updated_since=2026-02-01T00:00:00Z", ["APPLE-IPHONE", "SONY-XM5"]],
    ["updated_since=2026-02-01", ["APPLE-IPHONE", "SONY-XM5"]],
    ["updated_since=2026-02-01T01:00:00%2B01:00", ["APPLE-IPHONE", "SONY-XM5"]],
    ["updated_since=2026-02-01T00:00:00.001Z", ["SONY-XM5"]],
    ["brand=Sony&competitor=cmp_walmart&updated_since=2026-02-01", ["SONY-XM5"]],
    ["brand=Sony&category=TVs", ["SONY-TV"]],
  ])("filters by %s", async (query, expected) => {
    const body = await expectJson(await get(`/products?${query}`), 200);
    expect(skus(body)).toEqual(expected);
  });

  it.each([
    ["updated_since=yesterday", /updated_since/],
    ["updated_since=2026-13-01", /updated_since/],
    ["updated_since=", /updated_since/],
    ["brand=", /brand/],
    [`sku=${"x".repeat(201)}`, /sku/],
    ["colour=red", /colour/],
    ["competitor_id=walmart", /competitor_id/],
  ])("refuses %s with a 400 naming the parameter", async (query, field) => {
    const body = await expectJson(await get(`/products?${query}`), 400);
    expect(body.detail).toMatch(field);
  });

  it("sends a strong ETag and answers If-None-Match with 304 and no body", async () => {
    const res = await get("/products");
    await expectJson(res, 200);
    const etag = res.headers.get("ETag")!;
    expect(etag).toMatch(/^"[^"]+"$/);
    expect(res.headers.get("Cache-Control")).toBe("private, no-cache");
    expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);

    for (const ifNoneMatch of [etag, `"other", ${etag}`, `W/${etag}`, "*"]) {
      const cached = await get("/products", { "If-None-Match": ifNoneMatch });
      expect(cached.status, ifNoneMatch).toBe(304);
      expect(await cached.text()).toBe("");
      expect(cached.headers.get("ETag")).toBe(etag);
    }
    expect((await get("/products", { "If-None-Match": '"cat-v0-stale"' })).status).toBe(200);
  });

  it("gives each filter set its own ETag, the same for the same filters however written", async () => {
    const etagOf = async (query: string) => {
      const res = await get(`/products${query}`);
      await expectJson(res, 200);
      return res.headers.get("ETag")!;
    };
    const all = await etagOf("");
    const sony = await etagOf("?brand=Sony");
    const sonyWalmart = await etagOf("?brand=Sony&competitor=cmp_walmart");
    expect(new Set([all, sony, sonyWalmart, await etagOf("?category=Sony")]).size).toBe(4);
    expect(await etagOf("?competitor=cmp_walmart&brand=sony")).toBe(sonyWalmart);
    expect((await get("/products?brand=SONY", { "If-None-Match": sony })).status).toBe(304);
    expect((await get("/products", { "If-None-Match": sony })).status).toBe(200);
  });

  it("moves the ETag when the catalogue version moves", async () => {
    const before = await get("/products");
    await expectJson(before, 200);
    const etag = before.headers.get("ETag")!;

    await createProduct({ sku: "NEW-ONE", brand: "Sony" });
    await publishSnapshot();

    const after = await get("/products", { "If-None-Match": etag });
    const body = await expectJson(after, 200);
    expect(after.headers.get("ETag")).not.toBe(etag);
    expect(skus(body)).toContain("NEW-ONE");
    expect((await get("/products", { "If-None-Match": after.headers.get("ETag")! })).status).toBe(304);
  });

  it.each([
    ["application/x-ndjson", "application/x-ndjson"],
    ["Application/X-NDJSON", "application/x-ndjson"],
    ["application/json;q=0.5, application/x-ndjson", "application/x-ndjson"],
    ["application/x-ndjson;q=0.5, application/json", "application/json"],
    ["application/x-ndjson;q=0, */*", "application/json"],
    ["*/*", "application/json"],
    ["text/html, application/json;q=0.9", "application/json"], // text/html alone is 406 (test/http/accept.test.ts)
  ])("Accept: %s gets %s (RFC 9110 negotiation, JSON unless NDJSON is preferred)", async (accept, type) => {
    const res = await get("/products", { Accept: accept });
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toBe(type);
    const text = new TextDecoder().decode(await res.arrayBuffer());
    expect(text.startsWith('{"products":[')).toBe(type === "application/json");
  });

  it("serves the same bytes to repeated requests", async () => {
    const first = await (await get("/products")).text();
    const second = await (await get("/products")).text();
    expect(second.length).toBeGreaterThan(0);
    expect(second).toBe(first);
  });

  it.each<[string, string | undefined]>([
    ["", undefined], // a client that sent none (curl without --compressed)
    ["identity", undefined],
    ["gzip, deflate", "gzip"],
  ])("negotiates on the client's own Accept-Encoding (cf.clientAcceptEncoding %j), not the edge's", async (sent, coding) => {
    // Cloudflare's edge and `wrangler dev` hand the worker "br, gzip" and keep what the client sent in request.cf.
    for (const path of ["/products", "/products?brand=sony"]) {
      const res = await exports.default.fetch(
        new Request(`https://api.test${path}`, {
          headers: { Authorization: `Bearer ${key}`, "Accept-Encoding": "br, gzip", "CF-Connecting-IP": randomTestIp() },
          cf: { clientAcceptEncoding: sent },
        }),
      );
      expect(res.status).toBe(200);
      expect(res.headers.get("Content-Encoding") ?? undefined).toBe(coding);
      if (!coding) expect(((await res.json()) as { products: unknown[] }).products.length).toBeGreaterThan(0);
      else await res.arrayBuffer();
    }
  });
});

describe("GET /products/:id", () => {
  it("returns one product in the same shape as the list", async () => {
    const list = await expectJson(await get("/products"), 200);
    const product = await expectJson(await get("/products/prd_headphones"), 200);
    expect(product).toEqual(list.products.find((p) => p.id === "prd_headphones"));
  });

  it("cuts multi-byte UTF-8 products out whole", async () => {
    const product = await expectJson(await get("/products/prd_cafe"), 200);
    expect(product).toMatchObject({ name: "Café Crème ☕ 🚀", brand: "Nestlé", summary: { min_price: "3.20", currency: "USD" } });
    const neighbour = await expectJson(await get("/products/prd_headphones"), 200);
    expect(neighbour.sku).toBe("SONY-XM5");
  });

  it("answers 404 with a detail for an unknown id", async () => {
    const body = await expectJson(await get("/products/prd_nope"), 404);
    expect(body).toEqual({ detail: expect.stringContaining("prd_nope") });
  });

  it("is served from the snapshot with no D1 statement, one R2 read of its segment cold and none warm, and shows a change once built", async () => {
    await publishSnapshot();
    await (await get("/products")).arrayBuffer(); // this isolate reads the new snapshot's pointer and manifest
    forgetKeptSegments();
    const cold = await get("/products/prd_headphones");
    const before = await expectJson(cold, 200);
    expect(workMeter(cold)).toMatchObject({ "d1-statements": 0, "r2-b": 1 });
    const warm = await get("/products/prd_headphones");
    expect(await expectJson(warm, 200)).toEqual(before);
    expect(workMeter(warm)).toMatchObject({ "d1-statements": 0, "r2-b": 0 });

    await changePrices(["SONY-XM5"]);
    expect(await expectJson(await get("/products/prd_headphones"), 200)).toEqual(before); // the snapshot's, until it is built
    await buildSnapshot();
    const after = await expectJson(await get("/products/prd_headphones"), 200);
    expect(after.offers.map((offer) => offer.price)).not.toEqual(before.offers.map((offer) => offer.price));
    const list = await expectJson(await get("/products"), 200);
    expect(after).toEqual(list.products.find((p) => p.id === "prd_headphones"));
  });

  it("a product created since the snapshot was built is a 404 without a D1 statement, and served once the snapshot holds it", async () => {
    await publishSnapshot();
    const { id } = await createProduct({ sku: `NEW-${Date.now()}`, name: "Not in the snapshot yet" });
    const missing = await get(`/products/${id}`);
    expect((await expectJson(missing, 404)).detail).toContain(id);
    expect(workMeter(missing)["d1-statements"]).toBe(0);
    await publishSnapshot();
    const res = await get(`/products/${id}`);
    expect(await expectJson(res, 200)).toMatchObject({ id, name: "Not in the snapshot yet" });
    expect(workMeter(res)["d1-statements"]).toBe(0);
  });
});

describe("catalogue routes and credentials", () => {
  const paths = ["/products", "/products/prd_headphones", "/products/prd_headphones/history", "/competitors"];

  it.each(paths)("%s needs an API key", async (path) => {
    const res = await call("GET", path);
    expect((await expectJson<ApiError>(res, 401)).detail).toMatch(/API key/);
    expect(res.headers.get("WWW-Authenticate")).toContain("Bearer");
  });

  it.each(paths)("%s refuses an account login", async (path) => {
    await expectJson(await call("GET", path, { token: await accountToken("someone") }), 401);
  });

  it.each(paths)("%s sends no CORS headers", async (path) => {
    const res = await get(path, { Origin: "https://evil.example" });
    await expectJson(res, 200);
    expect(res.headers.get("Access-Control-Allow-Origin")).toBeNull();
    const preflight = await call("OPTIONS", path, { headers: { Origin: "https://evil.example", "Access-Control-Request-Method": "GET" } });
    expect(preflight.headers.get("Access-Control-Allow-Origin")).toBeNull();
  });
});

describe("GET /products/:id reads one range of its segment", () => {
  beforeAll(async () => {
    await createCompetitor({ id: "cmp_a", name: "Range A", domain: null });
    await createCompetitor({ id: "cmp_b", name: "Range B", domain: null });
  });

  it("reads the one range that holds the product, from a segment that incremental builds left in several", async () => {
    await insertProducts(0, 60, 0, (i) => `prd_range_${String(i).padStart(3, "0")}`);
    await publishSnapshot();
    await changePrices(["SNAP-30"]); // a part in the middle re-encoded: the parts around it stay where they were
    await buildSnapshot();
    const manifest = await readManifest(env.CATALOGUE, (await readPointer(env.CATALOGUE))!.manifest);
    const segment = manifest.segments[segmentIndexOf(manifest.segments, "prd_range_030")]!;
    expect(segment.ndjson.extents.length).toBeGreaterThan(1);
    // Every extent starts a range of its own: a read never spans two objects' bytes.
    expect(new Set(segment.ndjsonReads!.map(([, extent]) => extent))).toEqual(new Set(segment.ndjson.extents.keys()));
    const list = await expectJson(await get("/products"), 200);
    for (const id of ["prd_range_000", "prd_range_030", "prd_range_059"]) {
      forgetKeptSegments();
      const res = await get(`/products/${id}`);
      expect(await expectJson(res, 200)).toEqual(list.products.find((p) => p.id === id));
      expect(workMeter(res)).toMatchObject({ "d1-statements": 0, "r2-b": 1 });
    }
  });

  it("reads the range of about 128 products that holds the product, not the whole segment", async () => {
    await insertProducts(1000, 400, 0, (i) => `prd_cut_${i}`);
    await publishSnapshot();
    const manifest = await readManifest(env.CATALOGUE, (await readPointer(env.CATALOGUE))!.manifest);
    expect(manifest.segments).toHaveLength(1);
    const reads = manifest.segments[0]!.ndjsonReads!;
    expect(reads.length).toBeGreaterThanOrEqual(3);
    const list = await expectJson(await get("/products"), 200);
    const ids = list.products.map((p) => p.id);
    const second = ids.indexOf(reads[1]![0]); // the first product of the second range
    expect(second).toBeGreaterThan(100);
    forgetKeptSegments();
    // The first range is read once; its last product is then at hand. The second range is a read of its own.
    for (const [at, r2Reads] of [
      [0, 1],
      [second - 1, 0],
      [second, 1],
      [second + 1, 0],
      [0, 0],
    ] as const) {
      const res = await get(`/products/${ids[at]}`);
      expect(await expectJson(res, 200)).toEqual(list.products[at]);
      expect(workMeter(res)).toMatchObject({ "d1-statements": 0, "r2-b": r2Reads });
    }
  });
});
