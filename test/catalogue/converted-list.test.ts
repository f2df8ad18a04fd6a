import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { CONVERTED_PREFIX } from "../../src/catalogue/converted-list.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { freshAccount } from "../helpers/accounts.ts";
import {
  buildSnapshot,
  changePrices,
  createCompetitor,
  insertProducts,
  publishSnapshot,
  randomProductId,
} from "../helpers/catalogue-factory.ts";
import { oneGzipMember, rawGet } from "../helpers/gzip-member.ts";
import { call, utf8Text } from "../helpers/http.ts";
import { settled } from "../helpers/settle.ts";
import { adminToken } from "../helpers/tokens.ts";

/**
 * GET /products?currency= with no filter (src/catalogue/converted-list.ts): converted segments kept in R2, so the
 * conversion is paid once a segment, currency and day. Its body is byte for byte what the filtered path gives for a
 * filter matching every product, in every form, cold or warm.
 */

const PRODUCTS = 2500;
let key: string;
const today = new Date().toISOString().slice(0, 10);
const putRates = async (rates: Record<string, string>) =>
  expect((await call("PUT", "/admin/fx-rates", { token: await adminToken(), body: { base: "EUR", date: today, rates } })).status).toBe(200);
/** The same products through the filtered path: a filter every product passes. */
const EVERY = "updated_since=2000-01-01T00:00:00Z";

/** R2 operations on converted pieces during `run` (not the read of which pieces the builder has seen kept, one a response). */
async function convertedOperations(run: () => Promise<unknown>) {
  const gets: string[] = [];
  const puts: string[] = [];
  const get = env.CATALOGUE.get.bind(env.CATALOGUE);
  const put = env.CATALOGUE.put.bind(env.CATALOGUE);
  vi.spyOn(env.CATALOGUE, "get").mockImplementation(((name: string, ...rest: []) => {
    if (name.startsWith(CONVERTED_PREFIX) && !name.endsWith("known.json")) gets.push(name);
    return get(name, ...rest);
  }) as R2Bucket["get"]);
  vi.spyOn(env.CATALOGUE, "put").mockImplementation(((
    name: string,
    ...rest: Parameters<R2Bucket["put"]> extends [string, ...infer R] ? R : never
  ) => {
    if (name.startsWith(CONVERTED_PREFIX)) puts.push(name);
    return put(name, ...rest);
  }) as R2Bucket["put"]);
  await run();
  // The pieces converted are kept after the answer: wait for those puts.
  await settled(async () =>
    expect((await env.CATALOGUE.list({ prefix: CONVERTED_PREFIX })).objects.length).toBeGreaterThanOrEqual(puts.length),
  );
  vi.restoreAllMocks();
  return { gets, puts };
}

afterEach(() => vi.restoreAllMocks());

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_a", name: "Shop A" });
  await createCompetitor({ id: "cmp_b", name: "Shop B" });
  await insertProducts(0, PRODUCTS, 0, randomProductId);
  await putRates({ USD: "1.0850", GBP: "0.8420" });
  await publishSnapshot();
});

describe("the converted whole list", () => {
  it.each([
    ["JSON", {}],
    ["NDJSON", { Accept: "application/x-ndjson" }],
  ] as const)("%s: the filtered path's body, cold and warm; the warm one converts nothing and writes nothing", async (_, headers) => {
    const expected = await utf8Text(await call("GET", `/products?currency=USD&${EVERY}`, { token: key, headers }));
    expect(expected.length).toBeGreaterThan(PRODUCTS * 100);
    let cold = "";
    const first = await convertedOperations(async () => {
      cold = await utf8Text(await call("GET", "/products?currency=USD", { token: key, headers }));
    });
    expect(cold).toBe(expected);
    const segments = first.gets.length;
    expect(segments).toBeGreaterThanOrEqual(3);
    expect(first.puts).toHaveLength(segments);
    let warm = "";
    const second = await convertedOperations(async () => {
      warm = await utf8Text(await call("GET", "/products?currency=USD", { token: key, headers }));
    });
    expect(warm).toBe(expected);
    expect(second.gets).toEqual(first.gets);
    expect(second.puts).toEqual([]);
  });

  it("gzip: one gzip member, the same bytes cold and warm (a strong ETag), and the filtered path's content", async () => {
    const expected = await utf8Text(await call("GET", `/products?currency=GBP&${EVERY}`, { token: key }));
    const read = async () => {
      const res = await rawGet("/products?currency=GBP", key, { "Accept-Encoding": "gzip" });
      expect(res.headers.get("Content-Encoding")).toBe("gzip");
      return { etag: res.headers.get("ETag"), bytes: new Uint8Array(await res.arrayBuffer()) };
    };
    let cold: Awaited<ReturnType<typeof read>> | undefined;
    await convertedOperations(async () => {
      cold = await read();
    });
    const warm = await read();
    expect(oneGzipMember(cold!.bytes)).toBe(expected);
    expect(warm.bytes).toEqual(cold!.bytes);
    expect(warm.etag).toBe(cold!.etag);
  });

  it("new rates make new pieces, and the body follows them", async () => {
    const list = () => call("GET", "/products?currency=GBP", { token: key }).then(utf8Text);
    const before = await list();
    await putRates({ USD: "1.2000", GBP: "0.8420" });
    await settled(async () => expect(await list()).not.toBe(before));
    const { puts } = await convertedOperations(list);
    expect(puts).toEqual([]);
    expect(await list()).toBe(await utf8Text(await call("GET", `/products?currency=GBP&${EVERY}`, { token: key })));
  });

  it("kept warm by the builder: after a new snapshot and after new rates, the next response converts nothing", async () => {
    const list = () => call("GET", "/products?currency=GBP", { token: key }).then(utf8Text);
    const filtered = () => call("GET", `/products?currency=GBP&${EVERY}`, { token: key }).then(utf8Text);
    // The builder's alarm steps, as production runs them one after another, until none is armed.
    const runAlarms = async () => {
      while (await runDurableObjectAlarm(catalogueBuilder(env))) {}
    };
    await list(); // a response that converted pieces asked the builder to keep GBP's JSON list warm
    await changePrices(["SNAP-7", "SNAP-1999"]);
    await buildSnapshot();
    await catalogueBuilder(env).poke();
    await runAlarms();
    const afterBuild = await convertedOperations(list);
    expect(afterBuild.puts).toEqual([]);
    await putRates({ USD: "1.3100", GBP: "0.8500" }); // its answer pokes the builder
    await runAlarms();
    let body = "";
    const afterRates = await convertedOperations(async () => {
      body = await list();
    });
    expect(afterRates.puts).toEqual([]);
    expect(body).toBe(await filtered());
  });
});
