import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { gunzipSync } from "node:zlib";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { RETENTION_MS } from "../../src/catalogue/snapshot/builder.ts";
import type { BuildLimits } from "../../src/catalogue/snapshot/limits.ts";
import { manifestKey, readPointer } from "../../src/catalogue/snapshot/manifest.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { runBuildSteps, runCollectSteps, snapshotInSteps } from "../helpers/build-steps.ts";
import { changePrices } from "../helpers/catalogue-factory.ts";
import { expectedProducts, listBody } from "../helpers/catalogue-views.ts";
import { fakeDateAt } from "../helpers/clock.ts";
import { rawGet } from "../helpers/gzip-member.ts";

/**
 * A response started on a snapshot completes byte for byte however slowly it is read, across later
 * builds that replace every segment and the clean-ups after them, as long as it is read within
 * RETENTION_MS; after that the snapshot's objects are gone. Time is the fake Date (the builder stamps
 * and compares release times itself); small limits make many segments of a few hundred products.
 */
const LIMITS: BuildLimits = { partTarget: 5, segmentTarget: 30, stepProducts: 300, stepSegments: 8 };
const PRODUCTS = 240;
const START = Date.now();
fakeDateAt(START);
let key: string;
let skus: string[];

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  skus = await snapshotInSteps(PRODUCTS, LIMITS);
  // A second snapshot replaces the first at START: the first's objects are due for deletion at START + RETENTION_MS.
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(START);
  await changePrices(skus.filter((_, i) => i % 3 === 0));
  await runBuildSteps({ limits: LIMITS });
  vi.useRealTimers();
  // This isolate's first catalogue request pokes the builder: run that alarm now, so none runs between the test's steps.
  await (await rawGet("/products", key, {})).arrayBuffer();
  await runDurableObjectAlarm(catalogueBuilder(env));
});

describe("retention of a replaced snapshot", () => {
  it("a response read slowly across later builds and clean-ups completes byte for byte; RETENTION_MS later its objects go", async () => {
    const expected = listBody(await expectedProducts());
    const served = (await readPointer(env.CATALOGUE))!.manifest;
    const response = await rawGet("/products", key, { "Accept-Encoding": "gzip" });
    const reader = response.body!.getReader();
    const chunks: Uint8Array[] = [];
    const readSome = async () => {
      const { done, value } = await reader.read();
      if (!done) chunks.push(value);
      return done;
    };
    await readSome();

    const HOUR = 3_600_000;
    expect(RETENTION_MS).toBeGreaterThanOrEqual(24 * HOUR); // the contract's rule
    // A third of the products (random ids: in every segment) change every 6 hours; the clean-up runs after each build.
    for (const hour of [6, 12, 18]) {
      vi.setSystemTime(START + hour * HOUR);
      await changePrices(skus.filter((_, i) => i % 3 === (hour / 6) % 3));
      expect(await runBuildSteps({ limits: LIMITS })).toMatchObject({ built: true });
      expect(await runCollectSteps()).toBe(0);
      await readSome();
    }
    // Past RETENTION_MS, the clean-up deletes the snapshot replaced at START, while the response still reads its own.
    vi.setSystemTime(START + RETENTION_MS + 1);
    expect(await runCollectSteps()).toBeGreaterThan(0);
    while (!(await readSome()));
    expect(gunzipSync(Buffer.concat(chunks)).toString("utf8")).toBe(expected);
    expect(await env.CATALOGUE.head(manifestKey(served))).not.toBeNull();

    // RETENTION_MS after the response's snapshot was replaced (at hour 6), its objects go too.
    vi.setSystemTime(START + 6 * HOUR + RETENTION_MS + 1);
    expect(await runCollectSteps()).toBeGreaterThan(0);
    expect(await env.CATALOGUE.head(manifestKey(served))).toBeNull();
  });
});
