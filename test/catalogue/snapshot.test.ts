import { env } from "cloudflare:workers";
import { gunzipSync } from "node:zlib";
import { eq, sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import type { ProductView } from "../../src/catalogue/schema.ts";
import { bumpCatalogueVersion } from "../../src/catalogue/service.ts";
import { SEGMENT_MAX, SEGMENT_TARGET } from "../../src/catalogue/snapshot/limits.ts";
import { readManifest, readPointer } from "../../src/catalogue/snapshot/manifest.ts";
import { database } from "../../src/platform/db.ts";
import { offers, priceHistory, products } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { Faults, runBuildSteps } from "../helpers/build-steps.ts";
import { buildSnapshot, changePrices, createCompetitor, insertProducts, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { expectedProducts, listBody } from "../helpers/catalogue-views.ts";
import { oneGzipMember, rawGet } from "../helpers/gzip-member.ts";
import { call, expectJson, workCounts } from "../helpers/http.ts";
import { ingest } from "../helpers/webhooks.ts";

// A catalogue of several segments (SEGMENT_TARGET products each), written straight into D1.
const PRODUCTS = Math.round(SEGMENT_TARGET * 2.5);
const db = () => database(env.DB);
let key: string;
const shopA = { id: "cmp_a", name: "Shop A" };
const idle = { id: "cmp_idle", name: "Idle" };

const get = <Path extends string>(path: Path, headers: Record<string, string> = {}) => call("GET", path, { token: key, headers });
const utf8 = async (res: Response) => new TextDecoder().decode(await res.arrayBuffer());
const gunzip = async (res: Response) => gunzipSync(new Uint8Array(await res.arrayBuffer())).toString("utf8");

/** The unfiltered gzip bodies, JSON and NDJSON, are each ONE gzip member holding exactly the product views. */
async function expectOneMemberBodies() {
  const expected = await expectedProducts();
  const json = await rawGet("/products", key, { "Accept-Encoding": "gzip" });
  expect(oneGzipMember(new Uint8Array(await json.arrayBuffer()))).toBe(listBody(expected));
  const ndjson = await rawGet("/products", key, { "Accept-Encoding": "gzip", Accept: "application/x-ndjson" });
  expect(oneGzipMember(new Uint8Array(await ndjson.arrayBuffer()))).toBe(expected.map((line) => `${line}\n`).join(""));
}

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_a", name: "Shop A" });
  await createCompetitor({ id: "cmp_b", name: "Shop B" });
  await createCompetitor({ id: "cmp_idle", name: "Idle" });
  await insertProducts(0, PRODUCTS);
  await publishSnapshot();
});

const FILTERS: [string, (p: ProductView) => boolean][] = [
  ["", () => true],
  ["?sku=SNAP-1234", (p) => p.sku === "SNAP-1234"],
  ["?sku=NOPE", () => false],
  ["?competitor=cmp_a", (p) => p.offers.some((o) => o.competitor_id === "cmp_a")],
  ["?competitor=cmp_idle", () => false],
  ["?brand=SONY", (p) => p.brand === "Sony"],
  ["?brand=nestl%C3%A9", (p) => p.brand === "Nestlé"],
  ["?category=kettles", (p) => p.category === "Kettles"],
  ["?updated_since=2026-03-01", (p) => p.updated_at >= "2026-03-01T00:00:00.000Z"],
  ["?updated_since=2027-01-01", () => false],
  [
    "?brand=acme&competitor=cmp_b&updated_since=2026-02-01",
    (p) => p.brand === "acme" && p.offers.some((o) => o.competitor_id === "cmp_b") && p.updated_at >= "2026-02-01",
  ],
];

describe("GET /products from the snapshot", () => {
  it("is built in segments of at most SEGMENT_TARGET products, with every product once", async () => {
    const manifest = await readManifest(env.CATALOGUE, (await readPointer(env.CATALOGUE))!.manifest);
    expect(manifest.segments.map((s) => s.count)).toEqual([SEGMENT_TARGET, SEGMENT_TARGET, PRODUCTS - 2 * SEGMENT_TARGET]);
    expect(manifest.products).toBe(PRODUCTS);
  });

  it.each(FILTERS)("%s: the same bytes as the product views from D1, identity, gzip and NDJSON", async (query, keep) => {
    const expected = (await expectedProducts()).filter((json) => keep(JSON.parse(json) as ProductView));
    const identity = await get(`/products${query}`);
    expect(identity.status).toBe(200);
    expect(identity.headers.get("Content-Encoding")).toBeNull();
    expect(await identity.text()).toBe(listBody(expected));

    const gzip = await rawGet(`/products${query}`, key, { "Accept-Encoding": "gzip, br" });
    expect(gzip.headers.get("Content-Encoding")).toBe("gzip");
    expect(await gunzip(gzip)).toBe(listBody(expected));

    const ndjson = await get(`/products${query}`, { Accept: "application/x-ndjson" });
    expect(ndjson.headers.get("Content-Type")).toBe("application/x-ndjson");
    expect(await utf8(ndjson)).toBe(expected.map((line) => `${line}\n`).join(""));
    const ndjsonGzip = await rawGet(`/products${query}`, key, { Accept: "application/x-ndjson", "Accept-Encoding": "gzip" });
    expect(await gunzip(ndjsonGzip)).toBe(expected.map((line) => `${line}\n`).join(""));

    const etags = [identity, gzip, ndjson, ndjsonGzip].map((res) => res.headers.get("ETag"));
    expect(new Set(etags).size).toBe(4);
  });

  it("the unfiltered gzip body is one gzip member (curl --compressed reads it whole), JSON and NDJSON", expectOneMemberBodies);

  it("an unfiltered request reads nothing from D1; 304 for each form's own ETag", async () => {
    const forms: Record<string, string>[] = [{}, { "Accept-Encoding": "gzip" }, { Accept: "application/x-ndjson" }];
    for (const headers of forms) {
      const res = await get("/products", headers);
      await res.arrayBuffer();
      expect(workCounts(res).d1).toBe(0);
      const cached = await get("/products", { ...headers, "If-None-Match": res.headers.get("ETag")! });
      expect(cached.status).toBe(304);
      expect(await cached.text()).toBe("");
      expect(workCounts(cached).d1).toBe(0);
    }
  });

  it("GET /competitors counts offers from the snapshot's summaries", async () => {
    const [a, b] = await Promise.all(["cmp_a", "cmp_b"].map((id) => db().$count(offers, eq(offers.competitorId, id))));
    const body = await expectJson(await get("/competitors"), 200);
    expect(body.competitors.map((c) => [c.id, c.offer_count])).toEqual([
      ["cmp_a", a],
      ["cmp_b", b],
      ["cmp_idle", 0],
    ]);
  });
});

describe("rebuilds", () => {
  it("a one-product change rewrites one segment, and a response begun before it streams the old snapshot whole", async () => {
    const before = listBody(await expectedProducts());
    const pending = await get("/products"); // headers sent, body not yet read
    await changePrices(["SNAP-1501"]);
    const report = await buildSnapshot();
    expect(report).toMatchObject({ built: true, full: false, segmentsWritten: 1 });
    expect(await pending.text()).toBe(before);
    expect(await (await get("/products")).text()).toBe(listBody(await expectedProducts()));
  });

  it("after a one-product rebuild (old segments and a new one mixed), the gzip bodies are still one member each", async () => {
    await changePrices(["SNAP-1999"]);
    const report = await buildSnapshot();
    expect(report).toMatchObject({ built: true, full: false, segmentsWritten: 1 });
    const manifest = await readManifest(env.CATALOGUE, report.manifest!);
    const builds = new Set(manifest.segments.flatMap((segment) => segment.json.extents.map((extent) => extent.key.split("/")[2])));
    expect(builds.size).toBeGreaterThanOrEqual(2); // ranges of objects of several builds
    await expectOneMemberBodies();
  });

  it("a build that throws half-way leaves the previous snapshot serving; the next build completes", async () => {
    const served = await get("/products");
    const etag = served.headers.get("ETag")!;
    const body = await served.text();
    await changePrices(["SNAP-11", "SNAP-2401"]);
    let puts = 0;
    // The second segment's first object fails to write (each segment is three objects), as a failing R2 write would.
    await expect(runBuildSteps({ faults: new Faults((op) => op === "r2.put" && ++puts === 4) })).rejects.toThrow(/Injected failure/);
    const after = await get("/products", { "If-None-Match": etag });
    expect(after.status).toBe(304);
    expect(await (await get("/products")).text()).toBe(body);

    expect(await buildSnapshot()).toMatchObject({ built: true });
    expect(await (await get("/products")).text()).toBe(listBody(await expectedProducts()));
  });

  it("concurrent ingestions end in a snapshot equal to D1", async () => {
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        ingest([
          { sku: `SNAP-${i * 400}`, competitor: idle, price: `${i + 3}.00` },
          { sku: `SNAP-NEW-${i}`, competitor: shopA, price: "1.00" },
        ]),
      ),
    );
    await buildSnapshot();
    expect(await (await get("/products")).text()).toBe(listBody(await expectedProducts()));
    const competitorsBody = await expectJson(await get("/competitors"), 200);
    expect(competitorsBody.competitors.find((c) => c.id === "cmp_idle")!.offer_count).toBe(6);
  });

  it("a segment grown past SEGMENT_MAX splits", async () => {
    // New ids all inside the last segment's range.
    await insertProducts(0x10000000, SEGMENT_MAX, 1_000_000);
    await db().batch([
      bumpCatalogueVersion(db()),
      db().update(products).set({ changedVersion: sql`(SELECT version FROM catalogue_state)` }).where(sql`changed_version = 1000000`),
    ]);
    const report = await buildSnapshot();
    expect(report.full).toBe(false);
    const manifest = await readManifest(env.CATALOGUE, report.manifest!);
    expect(Math.max(...manifest.segments.map((s) => s.count))).toBeLessThanOrEqual(SEGMENT_MAX);
    expect(manifest.segments.length).toBeGreaterThan(3);
    expect(await (await get("/products")).text()).toBe(listBody(await expectedProducts()));
  });

  it("a reset (what `npm run seed` writes: rows replaced, reset_version moved) is a full build without the removed products", async () => {
    await db().delete(priceHistory).where(sql`product_id < 'prd_00000100'`);
    await db().delete(offers).where(sql`product_id < 'prd_00000100'`);
    await db().delete(products).where(sql`id < 'prd_00000100'`);
    await env.DB.prepare("UPDATE catalogue_state SET version = version + 1, reset_version = version + 1").run();
    const report = await buildSnapshot();
    expect(report).toMatchObject({ built: true, full: true });
    expect(await (await get("/products")).text()).toBe(listBody(await expectedProducts()));
    expect(await buildSnapshot()).toMatchObject({ built: false });
  });
});
