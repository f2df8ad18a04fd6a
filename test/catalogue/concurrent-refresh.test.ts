import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { database } from "../../src/platform/db.ts";
import { loadCatalogue, VERSION_CHECK_INTERVAL_MS } from "../../src/catalogue/service.ts";
import { createCompetitor, createProduct, newApiKey, publishCatalogue } from "../helpers/catalogue-factory.ts";
import { call } from "../helpers/http.ts";

// `npm run bench` found that requests which awaited the refresh another request was running resumed
// in that request's context in workerd, where the Response they built failed ("Cannot perform I/O on
// behalf of a different request"): 500s under load. Separate requests in separate contexts are what
// that takes, which these tests cannot make, so the bench's load is what shows that; here: readers
// never wait on another reader's refresh, so one that never finishes (its request was cancelled)
// cannot hold up the rest.

let keys: string[];

beforeAll(async () => {
  keys = await Promise.all([newApiKey(), newApiKey(), newApiKey()]);
  await createCompetitor({ id: "cmp_concurrent", name: "Concurrent", domain: null });
  for (let i = 0; i < 20; i++) await createProduct({ sku: `CONCURRENT-${i}`, offers: [{ competitor: "cmp_concurrent", price: `${i + 1}.00` }] });
});

/** A D1 binding whose every query hangs: the refresh of a request that was cancelled mid-read. */
function hangingD1(): D1Database {
  const never = () => new Promise<never>(() => {});
  const statement: object = new Proxy({}, { get: (_, property) => (property === "bind" ? () => statement : never) });
  return new Proxy({}, { get: (_, property) => (property === "prepare" ? () => statement : never) }) as D1Database;
}

const within = <T>(ms: number, promise: Promise<T>) =>
  Promise.race([promise, new Promise<"timed out">((resolve) => setTimeout(() => resolve("timed out"), ms))]);

describe("reads while the catalogue is being refreshed", () => {
  it("many at once after a change all answer 200 with the new catalogue", async () => {
    await publishCatalogue();
    const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => call("GET", "/products?competitor=cmp_concurrent", { token: keys[i % keys.length]! })));
    expect(responses.map((res) => res.status)).toEqual(responses.map(() => 200));
    for (const res of responses) expect(((await res.json()) as { products: unknown[] }).products).toHaveLength(20);
  });

  it("a refresh that never finishes does not hold up the others: they get the copy last confirmed", async () => {
    const current = await loadCatalogue(database(env.DB));
    await new Promise((resolve) => setTimeout(resolve, VERSION_CHECK_INTERVAL_MS + 50)); // a version check is due
    void loadCatalogue(database(hangingD1())); // starts the check, and never ends it
    expect(await within(2000, loadCatalogue(database(env.DB)))).toBe(current);
    const res = await within(2000, call("GET", "/products?competitor=cmp_concurrent", { token: keys[0]! }));
    expect(res === "timed out" ? res : res.status).toBe(200);
  });
});
