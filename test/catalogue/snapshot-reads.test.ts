import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { INLINE_CONVERTED_SEGMENTS } from "../../src/catalogue/converted-list.ts";
import { forgetKeptPartIndexes } from "../../src/catalogue/filtered.ts";
import { POINTER_KEY, readManifest, readPointer } from "../../src/catalogue/snapshot/manifest.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { COMPACT_READS } from "../../src/catalogue/snapshot/value-lists.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { type BulkProduct, createCompetitor, insertProductRows, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { storeTodaysRates } from "../helpers/fx-rates.ts";
import { call } from "../helpers/http.ts";
import { postMcp, toolCall } from "../helpers/mcp.ts";

/**
 * Every catalogue read path from the snapshot (src/catalogue/filtered.ts), at two catalogue sizes: once the isolate
 * has the snapshot's manifest, no D1 statement at all, and R2 reads and bytes that follow the result (at most 5 × the
 * products and bytes returned, plus a constant), however large the catalogue. Counted at the bindings (D1 and R2
 * spied in the isolate the worker shares with the test), so what a body does while it streams counts too.
 */

const SIZES = [10_000, 100_000] as const;
const COMPETITORS = ["cmp_a", "cmp_b", "cmp_c", "cmp_d"];
let key: string;
const randomHex = (bytes: number) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");

/** `count` products with random ids, brands of 1 % ("Rare") and 10 % ("Common"), categories, offers and update times. */
async function addProducts(count: number, from: number) {
  for (let start = 0; start < count; start += 2000) {
    const rows: BulkProduct[] = Array.from({ length: Math.min(2000, count - start) }, (_, k) => {
      const i = from + start + k;
      return {
        id: `prd_${randomHex(16)}`,
        sku: `SR-${i}`,
        name: `Product ${i} “${i % 3 === 0 ? "Ünïcødé" : "plain"}”`,
        brand: i % 100 === 7 ? "Rare" : i % 10 === 3 ? "Common" : `Brand ${i % 997}`,
        category: i % 50 === 1 ? "Drones" : `Category ${i % 211}`,
        updated_at: new Date(Date.UTC(2026, 0, 1) + (i % 1000) * 3_600_000).toISOString(),
        offers: COMPETITORS.filter((_, c) => (i + c) % (c + 2) === 0).map((competitor_id) => ({
          competitor_id,
          price_minor: 100 + (i % 9000),
        })),
      };
    });
    await insertProductRows(rows);
  }
}

/** What a call cost at the bindings: D1 statements, and R2 reads with their bytes (not the snapshot's pointer, re-read at most once a second). */
async function measured(path: string | [tool: string, args: Record<string, unknown>]) {
  let statements = 0;
  let r2Reads = 0;
  let r2Bytes = 0;
  const prepare = env.DB.prepare.bind(env.DB);
  const get = env.CATALOGUE.get.bind(env.CATALOGUE);
  const spies = [
    vi.spyOn(env.DB, "prepare").mockImplementation((...args: Parameters<D1Database["prepare"]>) => {
      statements++;
      return prepare(...args);
    }),
    vi.spyOn(env.CATALOGUE, "get").mockImplementation((async (...args: Parameters<R2Bucket["get"]>) => {
      const object = await get(...args);
      if (args[0] === POINTER_KEY) return object;
      r2Reads++;
      const range = object?.range as { length?: number } | undefined;
      if (object) r2Bytes += range?.length ?? object.size;
      return object;
    }) as R2Bucket["get"]),
  ];
  try {
    const res =
      typeof path === "string" ? await call("GET", path as "/products", { token: key }) : await postMcp(key, toolCall(1, ...path));
    const body = await res.text();
    expect(res.status, body).toBe(200);
    let products = 1;
    if (typeof path === "string" && path.startsWith("/products?")) products = (JSON.parse(body) as { products: unknown[] }).products.length;
    if (typeof path !== "string") {
      const answer = JSON.parse(body) as { result: { isError?: boolean; structuredContent: { products?: unknown[] } } };
      expect(answer.result.isError, body).toBeFalsy();
      products = answer.result.structuredContent.products?.length ?? 1;
    }
    return { statements, r2Reads, r2Bytes, bodyBytes: new TextEncoder().encode(body).length, products };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

afterEach(() => vi.restoreAllMocks());

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  for (const id of COMPETITORS) await createCompetitor({ id, name: `Shop ${id}` });
  await storeTodaysRates(); // ?currency=EUR converts (a currency without a rate is refused)
});

const PATHS = [
  "/products?brand=nobody-has-this",
  "/products?sku=SR-17",
  "/products?brand=rare",
  "/products?category=DRONES",
  "/products?competitor=cmp_d",
  "/products?updated_since=2026-02-11T00:00:00Z",
  "/products?brand=common&category=drones&competitor=cmp_a",
  "/products?brand=rare&currency=EUR",
  "/products?sku=SR-4242&brand=brand%20254",
];

// A broad filter over 100,000 products reads and tests them all: seconds, more than the project's 20 s on a busy machine.
describe.each(SIZES)("at %i products", { timeout: 60_000 }, (size) => {
  let productId: string;

  beforeAll(async () => {
    const held = (await env.DB.prepare("SELECT count(*) AS n FROM products WHERE sku LIKE 'SR-%'").first<{ n: number }>())!.n;
    await addProducts(size - held, held);
    await publishSnapshot();
    const list = await call("GET", "/products?sku=SR-17", { token: key });
    productId = ((await list.json()) as { products: { id: string }[] }).products[0]!.id;
  }, 300_000);

  it.each(PATHS)("%s: no D1 statement once warm, R2 reads and bytes that follow the result", async (path) => {
    forgetKeptPartIndexes();
    await measured(path); // the isolate reads the snapshot's directory and the part indexes it needs
    const warm = await measured(path);
    expect(warm.statements).toBe(0);
    expect(warm.r2Reads).toBeLessThanOrEqual(5 * warm.products + 2);
    expect(warm.r2Bytes).toBeLessThanOrEqual(5 * warm.bodyBytes + 2048);
    if (warm.products === 0) expect(warm.r2Reads).toBe(0);
  });

  // Before per-value lists, a 10 % brand read a range per part holding one of its products: hundreds at 100,000.
  it.each(["/products?brand=rare", "/products?category=DRONES", "/products?brand=common"])(
    "%s reads its value list: at most COMPACT_READS ranges whatever the catalogue's size",
    async (path) => {
      await measured(path);
      const warm = await measured(path);
      expect(warm.products).toBeGreaterThanOrEqual(size / 100);
      expect(warm.r2Reads).toBeLessThanOrEqual(COMPACT_READS);
      expect(warm.statements).toBe(0);
    },
  );

  it("the whole list in a currency: converted by the response up to INLINE_CONVERTED_SEGMENTS segments, past them a 503 while the builder converts it in steps of its own", async () => {
    const list = () => call("GET", "/products?currency=EUR", { token: key });
    const first = await list();
    const body = await first.text();
    const segments = (await readManifest(env.CATALOGUE, (await readPointer(env.CATALOGUE))!.manifest)).segments.length;
    if (segments <= INLINE_CONVERTED_SEGMENTS) expect(first.status, body).toBe(200);
    else {
      expect(first.status, body).toBe(503);
      expect(first.headers.get("Retry-After")).toBe("30");
      expect((JSON.parse(body) as { detail: string }).detail).toContain(`of ${segments} parts left`);
      // The builder's alarm steps, as production runs them one after another, until none is armed.
      while (await runDurableObjectAlarm(catalogueBuilder(env))) {}
    }
    const warm = await list();
    const converted = await warm.text();
    expect(warm.status, converted).toBe(200);
    const every = await call("GET", "/products?currency=EUR&updated_since=2000-01-01T00:00:00Z", { token: key });
    expect(converted).toBe(await every.text());
  });

  const TOOLS: [string, Record<string, unknown>][] = [
    ["search_products", { brand: "Rare", limit: 20 }],
    ["search_products", { category: "drones", competitor: "cmp_b", limit: 5 }],
    ["search_products", { sku: "SR-99", currency: "EUR" }],
    ["get_product", { sku: "SR-17" }],
    ["list_competitors", {}],
  ];
  it.each(TOOLS)("MCP %s %j: no D1 statement once warm, R2 reads that follow the answer", async (...tool) => {
    await measured(tool);
    const warm = await measured(tool);
    expect(warm.statements).toBe(0);
    expect(warm.r2Reads).toBeLessThanOrEqual(5 * warm.products + 2);
  });

  it("GET /products/{id}, with and without currency: no D1 statement once warm", async () => {
    for (const path of [`/products/${productId}`, `/products/${productId}?currency=EUR`]) {
      await measured(path);
      expect((await measured(path)).statements).toBe(0);
    }
  });
});
