import { env } from "cloudflare:workers";
import { asc, inArray } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { BUILD_LIMITS, type BuildWork, readManifest, readPointer, STEP_D1_STATEMENTS } from "../../src/catalogue/build.ts";
import { type Manifest, type Part, PartIndex, segmentIndexOf } from "../../src/catalogue/manifest.ts";
import { database } from "../../src/platform/db.ts";
import { products } from "../../src/platform/tables.ts";
import { runBuildSteps } from "../helpers/build-steps.ts";
import {
  changePrices,
  createCompetitor,
  insertProducts,
  newApiKey,
  publishCatalogue,
  randomProductId,
} from "../helpers/catalogue-factory.ts";
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
    // A step starts no segment past stepProducts, and a segment holds at most twice segmentTarget.
    expect(work.productsEncoded).toBeLessThan(BUILD_LIMITS.stepProducts + 2 * BUILD_LIMITS.segmentTarget);
    expect(work.segmentsWritten).toBeLessThanOrEqual(BUILD_LIMITS.stepSegments);
  }
  return { report, steps };
}

beforeAll(async () => {
  key = await newApiKey();
  await createCompetitor({ id: "cmp_a", name: "Shop A" });
  await createCompetitor({ id: "cmp_b", name: "Shop B" });
  await insertProducts(0, PRODUCTS, 0, randomProductId);
  skus = (await database(env.DB).select({ sku: products.sku }).from(products).orderBy(asc(products.id))).map((row) => row.sku);
});

describe("a build in bounded steps", () => {
  it("a full build takes several steps, each within its D1, product and segment budgets, and serves every product", async () => {
    await publishCatalogue(); // marks every product changed; its build runs in the builder object (no budgets checked there)
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

  it("a change scattered over every segment re-encodes only the parts holding a changed product, and copies the rest", async () => {
    const before = await current();
    const indexes = await Promise.all(
      before.segments.map(async (segment) => PartIndex.parse(await (await env.CATALOGUE.get(segment.parts!))!.json())),
    );
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

    await changePrices(changed);
    const { report } = await budgetedBuild();
    expect(report.full).toBe(false);
    expect(report.work.partsEncoded).toBe(dirtyParts.size);
    expect(report.work.productsEncoded).toBe([...dirtyParts.values()].reduce((sum, part) => sum + part.count, 0));
    expect(report.work.productsEncoded / PRODUCTS).toBeLessThan(0.15);
    // Three objects per rewritten segment (both forms, the part index), then the manifest and the pointer.
    expect(report.work.r2Writes).toBe(3 * touched.size + 2);

    const after = await current();
    for (const [i, segment] of before.segments.entries()) {
      if (touched.has(i)) expect(after.segments[i]!.json.key).not.toBe(segment.json.key);
      else expect(after.segments[i]).toEqual(i === 0 ? { ...segment, first: "" } : segment);
    }
    expect(await served()).toBe(listBody(await expectedProducts()));
  });
});
