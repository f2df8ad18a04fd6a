import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { bumpCatalogueVersion } from "../../src/catalogue/service.ts";
import { RETENTION_MS } from "../../src/catalogue/snapshot/builder.ts";
import { SEGMENT_TARGET } from "../../src/catalogue/snapshot/limits.ts";
import {
  directoryKey,
  type Manifest,
  manifestKey,
  POINTER_KEY,
  readManifest,
  snapshotObjects,
} from "../../src/catalogue/snapshot/manifest.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { database } from "../../src/platform/db.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { buildSnapshot, changePrices, createCompetitor, insertProducts, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { fakeDateAt } from "../helpers/clock.ts";
import { call } from "../helpers/http.ts";

/**
 * The builder deletes the objects of a snapshot retired more than RETENTION_MS ago, except those a kept
 * snapshot (the current one, or one retired within RETENTION_MS) still uses. Time is driven with a fake
 * Date (test/helpers/clock.ts), not by editing the builder's stored entries: the builder stamps and
 * compares the retirement times itself, so the test goes through the real code, storage layout and
 * boundary (RETENTION_MS exactly still keeps) included. The tests run in order; each builds on the last.
 *
 * Snapshots (segment n changed by build k is "k.n"; an incremental build writes only the changed
 * parts into objects of its own and keeps pointing at the rest where they are, so a snapshot uses the
 * objects of every build that wrote one of its parts, and releases an object only once no part of it is used):
 *   S1 full  [1.0 1.1 1.2]   S2 [1.0 2.1 1.2]   S3 [1.0 2.1 3.2]   S4 = S3 (version only)
 *   S5 [5.0 2.1 3.2]         S6 [5.0 6.1 3.2]   S7 = S6 (version only)
 */

const START = Date.now();
fakeDateAt(START);

// Three segments: SNAP-0…999, SNAP-1000…1999, SNAP-2000…2499.
const PRODUCTS = Math.round(SEGMENT_TARGET * 2.5);
const IN_SEGMENT = ["SNAP-501", "SNAP-1501", "SNAP-2001"] as const;
/** Objects that are not the snapshot's, inside its prefix and outside: never touched. */
const UNRELATED = ["catalogue/README.txt", "exports/prices-2026-11.csv"];

let key: string;
const snapshots: Manifest[] = [];
const snapshot = (n: number) => snapshots[n - 1]!;

/** Key → etag of everything in the bucket. */
async function listBucket(): Promise<Map<string, string>> {
  const listed = new Map<string, string>();
  let cursor: string | undefined;
  do {
    const page = await env.CATALOGUE.list({ cursor });
    for (const object of page.objects) listed.set(object.key, object.etag);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return listed;
}

/** Every object a snapshot needs: its segments' and its manifest. */
const objectsOf = (manifest: Manifest) => snapshotObjects(manifest);
/** What the build that replaced `old` by `next` released: the objects of `old` that `next` does not use. */
const releasedBy = (old: Manifest, next: Manifest) => objectsOf(old).filter((object) => !objectsOf(next).includes(object));

/** At `time`, makes a change (none: only the version moves) and builds; returns the new snapshot. */
async function buildAt(time: number, skus: readonly string[] = []): Promise<Manifest> {
  vi.setSystemTime(time);
  if (skus.length > 0) await changePrices(skus);
  else await bumpCatalogueVersion(database(env.DB));
  const report = await buildSnapshot();
  expect(report).toMatchObject({ built: true, full: false });
  const manifest = await readManifest(env.CATALOGUE, report.manifest!);
  snapshots.push(manifest);
  return manifest;
}

/** What GET /products serves now, as JSON and as NDJSON. */
async function served(): Promise<[string, string]> {
  const json = await call("GET", "/products", { token: key });
  const ndjson = await call("GET", "/products", { token: key, headers: { Accept: "application/x-ndjson" } });
  expect([json.status, ndjson.status]).toEqual([200, 200]);
  return [await json.text(), new TextDecoder().decode(await ndjson.arrayBuffer())];
}

/** Every product is served, as JSON and as NDJSON (a missing segment object would break the stream). */
async function expectServedWhole() {
  const [json, ndjson] = await served();
  expect(json.match(/"sku":"SNAP-\d+"/g)).toHaveLength(PRODUCTS);
  expect(ndjson.split("\n").slice(0, -1)).toHaveLength(PRODUCTS);
}

/**
 * Builds, then checks the bucket holds exactly what it held before, less `gone`, plus the new
 * snapshot's objects; every object kept is unchanged (same etag) but the pointer, which the build moves.
 */
async function expectCollected(build: () => Promise<Manifest>, gone: () => string[]) {
  const before = await listBucket();
  const built = await build();
  const deleted = gone();
  for (const object of deleted) expect(before.has(object), `${object} existed`).toBe(true);
  const after = await listBucket();
  const expected = new Set([...before.keys()].filter((object) => !deleted.includes(object)));
  for (const object of objectsOf(built)) expected.add(object);
  expect([...after.keys()].sort()).toEqual([...expected].sort());
  for (const [object, etag] of after) if (before.has(object) && object !== POINTER_KEY) expect(etag, object).toBe(before.get(object));
  return built;
}

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_a", name: "Shop A" });
  await createCompetitor({ id: "cmp_b", name: "Shop B" });
  await insertProducts(0, PRODUCTS);
  for (const object of UNRELATED) await env.CATALOGUE.put(object, `not a snapshot: ${object}`);
  const report = await publishSnapshot();
  snapshots.push(await readManifest(env.CATALOGUE, report.manifest!));
  expect(snapshot(1).segments).toHaveLength(3);
  // This isolate's first catalogue request pokes the builder: run that alarm now, so none fires between a change and its build.
  await served();
  await runDurableObjectAlarm(catalogueBuilder(env));
});

describe("collecting retired snapshots", () => {
  it("keeps every object of a snapshot retired RETENTION_MS ago or less, and a response begun on it streams it whole", async () => {
    const pending = await call("GET", "/products", { token: key }); // S1: headers sent, body not yet read
    const s1 = snapshot(1);
    const s2 = await buildAt(START, [IN_SEGMENT[1]]); // S1 retired at START
    expect(s2.segments[0]).toEqual(s1.segments[0]); // an incremental build shares what it did not rewrite
    expect(objectsOf(s2)).toEqual(expect.arrayContaining(objectsOf(s1).slice(0, -2))); // segment 1's unchanged parts too (not its directory and manifest)
    const s3 = await buildAt(START + RETENTION_MS, [IN_SEGMENT[2]]); // S1 retired exactly RETENTION_MS ago: kept
    const listed = await listBucket();
    for (const object of [...objectsOf(s1), ...objectsOf(s2), ...objectsOf(s3), ...UNRELATED])
      expect(listed.has(object), object).toBe(true);
    const body = await pending.text();
    expect(body.match(/"sku":"SNAP-\d+"/g)).toHaveLength(PRODUCTS);
    expect(body).not.toBe((await served())[0]); // it was the old snapshot, prices since changed
  });

  it("after RETENTION_MS, the next build deletes the snapshot's manifest and the segments no kept snapshot uses; the current one serves byte for byte", async () => {
    const before = await served();
    // S1 expires (retired RETENTION_MS + 1 ago): what S2 stopped using goes, its manifest (S2 still uses all of S1's parts but segment 1's changed one).
    const s4 = await expectCollected(
      () => buildAt(START + RETENTION_MS + 1),
      () => releasedBy(snapshot(1), snapshot(2)),
    );
    expect(releasedBy(snapshot(1), snapshot(2))).toEqual([directoryKey(snapshot(1).id), manifestKey(snapshot(1).id)]);
    expect(s4.segments).toEqual(snapshot(3).segments);
    expect(s4.segments[0]).toEqual(snapshot(1).segments[0]); // shared with the current snapshot: kept
    expect(await served()).toEqual(before);
  });

  it("a segment the current snapshot no longer uses stays while a kept snapshot does", async () => {
    // S2 expires; S3 (retired at START + RETENTION_MS + 1) and S4 are kept, and they still use S1's segment 0.
    const s5 = await expectCollected(
      () => buildAt(START + 2 * RETENTION_MS + 1, [IN_SEGMENT[0]]),
      () => releasedBy(snapshot(2), snapshot(3)),
    );
    expect(s5.segments[0]!.json).not.toEqual(snapshot(1).segments[0]!.json);
    await expectServedWhole();
  });

  it("a retired snapshot whose manifest is already gone: the build still succeeds, nothing it may share is deleted, and nothing leaks", async () => {
    // S4's manifest disappears while S4 is kept. The clean-up never reads a kept snapshot's manifest (each build records
    // what the snapshot it replaced stops using, see docs/catalogue.md), so this changes nothing: the build deletes what
    // is due, S3's manifest (S4 replaced it, keeping all its segments, at START + RETENTION_MS + 1), and nothing S4 shares.
    await env.CATALOGUE.delete(manifestKey(snapshot(4).id));
    const before = await listBucket();
    const s6 = await buildAt(START + 2 * RETENTION_MS + 2, [IN_SEGMENT[1]]);
    const after = await listBucket();
    const gone = [directoryKey(snapshot(3).id), manifestKey(snapshot(3).id)];
    expect([...after.keys()].sort()).toEqual(
      [...new Set([...before.keys(), ...objectsOf(s6)])].filter((object) => !gone.includes(object)).sort(),
    );
    await expectServedWhole();

    // Once every retired snapshot has expired, all of them go (S4's entry without a manifest too): only the current
    // snapshot, the one it replaced (kept for RETENTION_MS), the pointer and the unrelated objects are left.
    const s7 = await buildAt(START + 4 * RETENTION_MS);
    const left = [...(await listBucket()).keys()].sort();
    expect(left).toEqual([...new Set([POINTER_KEY, ...objectsOf(s6), ...objectsOf(s7), ...UNRELATED])].sort());
  });
});
