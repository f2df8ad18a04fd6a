import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { asc, inArray } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import type { BuildWork } from "../../src/catalogue/snapshot/build-report.ts";
import { compactTo, MAX_EXTENTS } from "../../src/catalogue/snapshot/compaction.ts";
import { BUILD_LIMITS, STEP_D1_STATEMENTS, STEP_R2_READS } from "../../src/catalogue/snapshot/limits.ts";
import {
  JSON_SEPARATOR,
  type Manifest,
  PART_INDEX_PREFIX,
  type Part,
  readManifest,
  readPointer,
  type Segment,
  segmentIndexOf,
} from "../../src/catalogue/snapshot/manifest.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { database } from "../../src/platform/db.ts";
import { products } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { runBuildSteps } from "../helpers/build-steps.ts";
import { changePrices, createCompetitor, insertProducts, publishSnapshot, randomProductId } from "../helpers/catalogue-factory.ts";
import { expectedProducts, listBody } from "../helpers/catalogue-views.ts";
import { call } from "../helpers/http.ts";

/**
 * A catalogue of random ids (as production has), larger than one build step at the production
 * limits: every step of a full and of an incremental build stays within its budgets, and a change
 * scattered over every segment re-encodes only the parts holding a changed product.
 */
const PRODUCTS = 6 * BUILD_LIMITS.segmentTarget + 321;
let key: string;
let skus: string[];

const current = async (): Promise<Manifest> => readManifest(env.CATALOGUE, (await readPointer(env.CATALOGUE))!.manifest);
const served = async () => (await call("GET", "/products", { token: key })).text();

/** Runs a build step by step, collecting each step's own work; every step must stay within the budgets. */
async function budgetedBuild() {
  const steps: BuildWork[] = [];
  const report = await runBuildSteps({ onStep: (work) => steps.push({ ...work }) });
  for (const work of steps) {
    expect(work.d1Statements, JSON.stringify(work)).toBeLessThanOrEqual(STEP_D1_STATEMENTS);
    expect(work.r2Reads, JSON.stringify(work)).toBeLessThanOrEqual(STEP_R2_READS);
    // A step starts no segment past stepProducts, and a segment holds at most twice segmentTarget.
    expect(work.productsEncoded).toBeLessThan(BUILD_LIMITS.stepProducts + 2 * BUILD_LIMITS.segmentTarget);
    expect(work.segmentsWritten).toBeLessThanOrEqual(BUILD_LIMITS.stepSegments);
  }
  return { report, steps };
}

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_a", name: "Shop A" });
  await createCompetitor({ id: "cmp_b", name: "Shop B" });
  await insertProducts(0, PRODUCTS, 0, randomProductId);
  skus = (await database(env.DB).select({ sku: products.sku }).from(products).orderBy(asc(products.id))).map((row) => row.sku);
});

describe("a build in bounded steps", () => {
  it("a full build takes several steps, each within its D1, product and segment budgets, and serves every product", async () => {
    await publishSnapshot(); // marks every product changed; its build runs in the builder object (no budgets checked there)
    await changePrices(skus.slice(0, 1));
    // A reset makes the next build a full one, here step by step.
    await env.DB.prepare("UPDATE catalogue_state SET reset_version = version").run();
    const { report, steps } = await budgetedBuild();
    expect(report).toMatchObject({ built: true, full: true, products: PRODUCTS });
    expect(steps.length).toBeGreaterThan(1);
    expect(report.work.productsEncoded).toBe(PRODUCTS);
    expect(report.largestStep.d1Statements).toBe(Math.max(...steps.map((work) => work.d1Statements)));
    expect(await served()).toBe(listBody(await expectedProducts()));
  });

  it("a change scattered over every segment re-encodes and writes only the parts holding a changed product; the rest stay where they are", async () => {
    const before = await current();
    const indexes = await Promise.all(before.segments.map(partIndex));
    // Two products in each segment, picked at random.
    const changed = skus.filter(() => Math.random() < 0.002).concat(skus.slice(-1));
    const changedIds = (await database(env.DB).select({ id: products.id }).from(products).where(inArray(products.sku, changed))).map(
      (row) => row.id,
    );
    const dirtyParts = new Map<string, Part>();
    for (const id of changedIds) {
      const s = segmentIndexOf(before.segments, id);
      const p = segmentIndexOf(indexes[s]!, id);
      dirtyParts.set(`${s}/${p}`, indexes[s]![p]!);
    }
    const touched = new Set(changedIds.map((id) => segmentIndexOf(before.segments, id)));
    const dirtyCount = (i: number) => [...dirtyParts.keys()].filter((key) => key.startsWith(`${i}/`)).length;

    await changePrices(changed);
    const { report } = await budgetedBuild();
    expect(report.full).toBe(false);
    // D1 reads what the change touches: each touched segment's rows once (its changed ids), and a few rows per product
    // re-encoded (the product, its offers, the id lookups). A statement that scans the catalogue would add all of it again.
    const touchedRows = [...touched].reduce((sum, i) => sum + before.segments[i]!.count, 0);
    expect(report.work.d1RowsRead).toBeLessThan(touchedRows + 8 * report.work.productsEncoded + 100);
    expect(report.work.partsEncoded).toBe(dirtyParts.size);
    expect(report.work.productsEncoded).toBe([...dirtyParts.values()].reduce((sum, part) => sum + part.count, 0));
    expect(report.work.productsEncoded / PRODUCTS).toBeLessThan(0.15);
    // Four objects per step that rewrote segments (both forms' new parts, their segments' part indexes for filtered
    // reads, and the value lists' pieces of the products re-encoded), one for the lists' compaction if any is due,
    // then the filter directory, the manifest and the pointer; the part indexes go to the builder's storage too,
    // one per segment written.
    const writingSteps = Math.ceil(touched.size / BUILD_LIMITS.stepSegments);
    expect(report.work.r2Writes).toBeLessThanOrEqual(4 * writingSteps + 4);
    expect(report.work.partIndexesWritten).toBe(report.work.segmentsWritten);
    const after = await current();
    const afterIndexes = await Promise.all(after.segments.map(partIndex));
    // What was written to R2 is the new parts (JSON with a stored "," between two): nothing copied.
    const oldObjects = new Set(indexes.flat().flatMap((part) => [part.json.key, part.ndjson.key]));
    const newParts = afterIndexes.flat().filter((part) => !oldObjects.has(part.json.key));
    const separators = JSON_SEPARATOR.bytes.length * newParts.length;
    // And the rewritten segments' part indexes: one per segment written, none for a segment kept.
    const oldIndexes = new Set(before.segments.map((segment) => segment.index.key));
    const newIndexBytes = after.segments.filter((segment) => !oldIndexes.has(segment.index.key)).reduce((sum, s) => sum + s.index.bytes, 0);
    const partBytes = report.work.r2BytesWritten - newIndexBytes - report.work.listBytesWritten;
    // The lists' pieces hold the products re-encoded again, each on its brand's and its category's list (NDJSON only).
    const newNdjson = newParts.reduce((sum, part) => sum + part.ndjson.bytes, 0);
    expect(report.work.listBytesWritten).toBeGreaterThan(0);
    expect(report.work.listBytesWritten).toBeLessThan(3 * newNdjson);
    expect(partBytes).toBeLessThanOrEqual(newParts.reduce((sum, part) => sum + part.json.bytes + part.ndjson.bytes, 0) + separators);
    const snapshotBytes = before.segments.reduce((sum, segment) => sum + segment.json.bytes + segment.ndjson.bytes, 0);
    expect(partBytes / snapshotBytes).toBeLessThan(0.15); // parts written, as a share of the catalogue's
    for (const [i, segment] of before.segments.entries()) {
      if (!touched.has(i)) {
        expect(after.segments[i]).toEqual(i === 0 ? { ...segment, first: "" } : segment);
        continue;
      }
      // A touched segment keeps its unchanged parts where they were, and takes a range more per run of changed parts at most.
      for (const [j, part] of indexes[i]!.entries())
        if (!dirtyParts.has(`${i}/${j}`)) expect(afterIndexes[i]![j]!.json.key).toBe(part.json.key);
      expect(after.segments[i]!.json.extents.length).toBeLessThanOrEqual(Math.min(MAX_EXTENTS, 1 + 2 * dirtyCount(i)));
    }
    expect(await served()).toBe(listBody(await expectedProducts()));
  });

  it("changes that would split a segment into more than MAX_EXTENTS ranges compact it: the short runs between them copied, down to compactTo(MAX_EXTENTS) ranges", async () => {
    const before = await current();
    const index = await partIndex(before.segments[1]!);
    // Every other part of segment 1 changes: twice as many ranges as parts changed.
    const changedIds = index.filter((_, j) => j % 2 === 1).map((part) => part.first);
    expect(2 * changedIds.length).toBeGreaterThan(MAX_EXTENTS);
    const changed = (await database(env.DB).select({ sku: products.sku }).from(products).where(inArray(products.id, changedIds))).map(
      (row) => row.sku,
    );
    await changePrices(changed);
    const { report } = await budgetedBuild();
    expect(report.work.partsEncoded).toBe(changedIds.length);
    const after = await current();
    for (const form of ["json", "ndjson"] as const) {
      expect(after.segments[1]![form].extents.length).toBeLessThanOrEqual(compactTo(MAX_EXTENTS));
      expect(after.segments[1]![form].extents.length).toBeGreaterThan(1); // not the whole segment copied
    }
    expect(after.segments[0]).toEqual(before.segments[0]);
    expect(await served()).toBe(listBody(await expectedProducts()));
  });

  it("the builder's storage holds the part indexes of the current snapshot and no others; without them the next build is full", async () => {
    const storedIndexes = () =>
      runInDurableObject(catalogueBuilder(env), async (_builder, state) =>
        [...(await state.storage.list({ prefix: PART_INDEX_PREFIX })).keys()].sort(),
      );
    const indexesOf = (manifest: Manifest) => manifest.segments.map((segment) => segment.parts).sort();
    // After the builds above (full, scattered, compacting), the replaced snapshots' indexes are gone.
    expect(await storedIndexes()).toEqual(indexesOf(await current()));

    // The object's storage lost its indexes (e.g. reset): an incremental build could not tell which parts changed.
    await runInDurableObject(catalogueBuilder(env), async (_builder, state) => {
      await state.storage.delete([...(await state.storage.list({ prefix: PART_INDEX_PREFIX })).keys()]);
      await state.storage.delete("indexed");
    });
    await changePrices([skus[0]!]);
    const { report } = await budgetedBuild();
    expect(report.full).toBe(true);
    expect(await storedIndexes()).toEqual(indexesOf(await current()));
    expect(await served()).toBe(listBody(await expectedProducts()));
  });
});

/** A segment's part index, from the builder's storage. */
async function partIndex(segment: Segment): Promise<Part[]> {
  const parts = await runInDurableObject(catalogueBuilder(env), (_builder, state) => state.storage.get<Part[]>(segment.parts));
  expect(parts).toBeDefined();
  return parts!;
}
