import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import type { BuildLimits } from "../../src/catalogue/snapshot/limits.ts";
import { POINTER_KEY, type Pointer, readManifest, readPointer } from "../../src/catalogue/snapshot/manifest.ts";
import { wholeCatalogue } from "../../src/catalogue/snapshot/read.ts";
import { Faults, runBuildSteps, snapshotInSteps } from "../helpers/build-steps.ts";
import { changePrices } from "../helpers/catalogue-factory.ts";
import { expectedProducts, listBody } from "../helpers/catalogue-views.ts";

/**
 * A build step that throws at any point (any D1 statement or batch, R2 read or write, or write of
 * the builder's own storage) is resumed by the next step from the progress recorded, and the build
 * completes with the same bytes as a build that never failed. Small limits make a build of a few
 * hundred products take many steps; the same code runs with the production limits.
 */
const LIMITS: BuildLimits = { partTarget: 4, segmentTarget: 20, stepProducts: 40, stepSegments: 1 };
const PRODUCTS = 50;

/** The current snapshot's gzip bodies, JSON and NDJSON, as a response streams them. */
async function servedBodies(): Promise<Uint8Array[]> {
  const manifest = await readManifest(env.CATALOGUE, (await readPointer(env.CATALOGUE))!.manifest);
  return Promise.all(
    (["json", "ndjson"] as const).map(
      async (form) => new Uint8Array(await new Response(wholeCatalogue(env.CATALOGUE, manifest, form, true)).arrayBuffer()),
    ),
  );
}

let skus: string[];

beforeAll(async () => {
  skus = await snapshotInSteps(PRODUCTS, LIMITS);
});

describe.each(["incremental", "full"] as const)("a %s build whose steps throw at any point", (kind) => {
  it("resumes each step from the progress recorded and completes with the bytes of an uninterrupted build", async () => {
    await changePrices(skus.filter((_, i) => i % 7 === 5));
    if (kind === "full") await env.DB.prepare("UPDATE catalogue_state SET reset_version = version").run();
    const base = (await readPointer(env.CATALOGUE)) as Pointer;

    // Each step's operations (D1 statements and batches, R2 reads and writes, writes of the builder's storage).
    const perStep: number[] = [];
    let counted = new Faults();
    const reference = await runBuildSteps({
      limits: LIMITS,
      faults: () => (counted = new Faults()),
      onStep: (_, outcome) => void (outcome.status !== "current" && perStep.push(counted.total)),
    });
    expect(reference).toMatchObject({ built: true, full: kind === "full" });
    expect(perStep.length).toBeGreaterThan(2);
    const expected = await servedBodies();
    const json = new Response(new Blob([expected[0]!]).stream().pipeThrough(new DecompressionStream("gzip")));
    expect(await json.text()).toBe(listBody(await expectedProducts()));

    // Build again from the same snapshot, every step failing once at its n-th operation, then run again: every point of every step.
    for (let failAt = 1; failAt <= Math.max(...perStep); failAt++) {
      await env.CATALOGUE.put(POINTER_KEY, JSON.stringify(base));
      const failures: string[] = [];
      const resumed = await runBuildSteps({
        limits: LIMITS,
        retry: true,
        faults: () => new Faults((op, total) => total === failAt && failures.push(op) > 0),
      });
      expect(resumed.built, `operation ${failAt}`).toBe(true);
      expect(failures.length, `operation ${failAt}`).toBeGreaterThan(0);
      expect(await servedBodies(), `operation ${failAt}`).toEqual(expected);
    }
  }, 60_000);
});
