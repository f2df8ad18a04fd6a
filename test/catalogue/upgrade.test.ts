import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { RETENTION_MS } from "../../src/catalogue/snapshot/builder.ts";
import { manifestKey, POINTER_KEY } from "../../src/catalogue/snapshot/manifest.ts";
import { buildCatalogue, createCompetitor, createProduct, newApiKey, publishCatalogue } from "../helpers/catalogue-factory.ts";
import { call } from "../helpers/http.ts";

/**
 * A deploy over a snapshot of the first layout (concatenated gzip members, named by the pointer
 * catalogue/current.json): it is never served, the builder makes a new one, and the old one's
 * objects are collected like any replaced snapshot's (the builder learns of it from the old pointer).
 */
const OLD = {
  pointer: "catalogue/current.json",
  manifest: "1-old-layout",
  segments: { json: "catalogue/segments/1-old-layout/0.json.gz", ndjson: "catalogue/segments/1-old-layout/0.ndjson.gz" },
};
let key: string;
const get = (headers: Record<string, string> = {}) => call("GET", "/products", { token: key, headers });

beforeAll(async () => {
  key = await newApiKey();
  await createCompetitor({ id: "cmp_a" });
  await createProduct({ id: "prd_1", sku: "UPGRADE-1", offers: [{ competitor: "cmp_a", price: "9.99" }] });
  // What the previous code left in R2 (the fields the builder's collection reads).
  await env.CATALOGUE.put(OLD.pointer, JSON.stringify({ manifest: OLD.manifest, version: 1 }));
  await env.CATALOGUE.put(
    manifestKey(OLD.manifest),
    JSON.stringify({
      id: OLD.manifest,
      version: 1,
      segments: [{ first: "", json: { key: OLD.segments.json }, ndjson: { key: OLD.segments.ndjson } }],
    }),
  );
  await env.CATALOGUE.put(OLD.segments.json, "old gzip member");
  await env.CATALOGUE.put(OLD.segments.ndjson, "old gzip member");
});

describe("a deploy over the first snapshot layout", () => {
  it("does not serve it: 503 with Retry-After until the builder made a new snapshot, then that one", async () => {
    const waiting = await get();
    expect(waiting.status).toBe(503);
    expect(waiting.headers.get("Retry-After")).toBe("2");
    await buildCatalogue(); // what the poke's alarm does (whichever of the two runs first builds; the other finds nothing to do)
    expect(POINTER_KEY).not.toBe(OLD.pointer);
    expect(await env.CATALOGUE.head(OLD.pointer)).toBeNull(); // read once, its snapshot retired
    const served = await get();
    expect(served.status).toBe(200);
    expect(((await served.json()) as { products: { sku: string }[] }).products.map((p) => p.sku)).toEqual(["UPGRADE-1"]);
  });

  it("collects the old snapshot's objects once its retention is over, like any replaced snapshot's", async () => {
    // The builder stamps the release itself; the clock moves past RETENTION_MS (only Date is faked).
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + RETENTION_MS + 1);
    onTestFinished(() => void vi.useRealTimers());
    const report = await publishCatalogue();
    expect(report.built).toBe(true);
    for (const gone of [manifestKey(OLD.manifest), OLD.segments.json, OLD.segments.ndjson])
      expect(await env.CATALOGUE.head(gone)).toBeNull();
    expect(await env.CATALOGUE.head(manifestKey(report.manifest!))).not.toBeNull();
    expect((await get()).status).toBe(200);
  });
});
