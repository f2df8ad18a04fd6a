import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { bumpCatalogueVersion } from "../../src/catalogue/service.ts";
import { buildStep, countingBucket, type StepOutcome } from "../../src/catalogue/snapshot/build.ts";
import { type BuildReport, type BuildWork, noBuildWork } from "../../src/catalogue/snapshot/build-report.ts";
import { collectStep, releaseObjects } from "../../src/catalogue/snapshot/builder.ts";
import { BUILD_LIMITS, type BuildLimits } from "../../src/catalogue/snapshot/limits.ts";
import { forgetManifest } from "../../src/catalogue/snapshot/read.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { database } from "../../src/platform/db.ts";
import { products } from "../../src/platform/tables.ts";
import { createCompetitor, insertProducts, randomProductId } from "./catalogue-factory.ts";

/**
 * The builder's steps run one by one inside the CatalogueBuilder object, with its real storage, D1
 * and R2, each wrapped so a test can make any operation throw (a step dying there) and count what a
 * step does. This is the test seam of src/catalogue/snapshot/build.ts: `buildStep` takes its D1, R2, storage
 * and limits as arguments, so production code carries no test option.
 */

/** Decides which operation throws: `op` names it ("d1.batch", "r2.put", "storage.put", …), `total` counts every operation so far. */
export class Faults {
  total = 0;
  constructor(private readonly failWhen: (op: string, total: number) => boolean = () => false) {}
  tick(op: string): void {
    this.total++;
    if (this.failWhen(op, this.total)) throw new Error(`Injected failure at operation ${this.total} (${op})`);
  }
}

/** `target` whose `methods` call faults.tick first (any result with `wrap` applied, for statements made by `prepare`/`bind`). */
function faulty<T extends object>(
  target: T,
  faults: Faults,
  label: string,
  methods: readonly string[],
  wrap: Partial<Record<string, (result: never) => unknown>> = {},
): T {
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property, object);
      if (typeof value !== "function") return value;
      const name = String(property);
      const then = wrap[name];
      if (!methods.includes(name) && !then) return value.bind(object);
      return (...args: unknown[]) => {
        if (methods.includes(name)) faults.tick(`${label}.${name}`);
        const result = value.apply(object, args);
        return then ? then(result as never) : result;
      };
    },
  });
}

const faultyStatement = (statement: D1PreparedStatement, faults: Faults): D1PreparedStatement =>
  faulty(statement, faults, "d1", ["run", "all", "first", "raw"], { bind: (bound: D1PreparedStatement) => faultyStatement(bound, faults) });
const faultyD1 = (d1: D1Database, faults: Faults) =>
  faulty(d1, faults, "d1", ["batch", "exec"], { prepare: (statement: D1PreparedStatement) => faultyStatement(statement, faults) });
const faultyR2 = (bucket: R2Bucket, faults: Faults) => faulty(bucket, faults, "r2", ["get", "head", "put", "delete", "list"]);
const faultyStorage = (storage: DurableObjectStorage, faults: Faults) =>
  faulty(storage, faults, "storage", ["get", "put", "delete", "list", "transaction"]);

export interface StepRun {
  limits?: BuildLimits;
  /** The faults of each step (the same for all by default); with `retry`, a step that throws is run again with none. */
  faults?: Faults | ((step: number) => Faults);
  retry?: boolean;
  /** Each step's own work and outcome, as it ends. */
  onStep?: (work: BuildWork, outcome: StepOutcome) => void;
}

/** Runs build steps until the snapshot holds the catalogue version (what the alarms do, one step each); throws what a step throws. */
export async function runBuildSteps({
  limits = BUILD_LIMITS,
  faults = new Faults(),
  retry = false,
  onStep,
}: StepRun = {}): Promise<BuildReport> {
  try {
    return await runInDurableObject(catalogueBuilder(env), async (_builder, state) => {
      const step = async (faults: Faults) => {
        const work = noBuildWork();
        const deps = {
          db: database(faultyD1(env.DB, faults), work),
          bucket: countingBucket(faultyR2(env.CATALOGUE, faults), work),
          storage: faultyStorage(state.storage, faults),
          work,
          limits,
        };
        return { work, outcome: await buildStep(deps, releaseObjects) };
      };
      let last: BuildReport | undefined;
      for (let n = 0; ; n++) {
        const stepFaults = typeof faults === "function" ? faults(n) : faults;
        const { work, outcome } = await step(stepFaults).catch((error: unknown) => {
          if (!retry) throw error;
          return step(new Faults());
        });
        onStep?.(work, outcome);
        if (outcome.status === "current") return last ?? outcome.report;
        if (outcome.status === "built") last = outcome.report;
      }
    });
  } finally {
    forgetManifest();
  }
}

/** Runs the clean-up steps that are due (what the alarms do once no build is waiting); returns how many deleted something. */
export async function runCollectSteps(): Promise<number> {
  return runInDurableObject(catalogueBuilder(env), async (_builder, state) => {
    let steps = 0;
    while (await collectStep(env.CATALOGUE, state.storage)) steps++;
    return steps;
  });
}

/**
 * `count` products of random ids (two competitors), all marked changed, and their first snapshot built
 * with `limits`; returns their SKUs. The setup of the tests that drive steps with small limits.
 */
export async function snapshotInSteps(count: number, limits: BuildLimits): Promise<string[]> {
  const db = database(env.DB);
  await createCompetitor({ id: "cmp_a", name: "Shop A" });
  await createCompetitor({ id: "cmp_b", name: "Shop B" });
  await insertProducts(0, count, 0, randomProductId);
  await db.batch([
    bumpCatalogueVersion(db),
    db.update(products).set({ changedVersion: sql`(SELECT version FROM catalogue_state WHERE id = 1)` }),
  ]);
  await runBuildSteps({ limits });
  return (await db.select({ sku: products.sku }).from(products)).map((row) => row.sku);
}
