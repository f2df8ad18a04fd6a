import { todaysRates } from "../../fx-rates/service.ts";
import { database } from "../../platform/db.ts";
import type { ObjectAnswer } from "../../platform/metered.ts";
import { MeteredObject } from "../../platform/metered-object.ts";
import { products } from "../../platform/tables.ts";
import { DAY_MS } from "../../platform/time.ts";
import { conversionInto } from "../converted.ts";
import { type WarmPieces, warmStep } from "../converted-list.ts";
import { type BuilderStorage, buildStep, cachedManifest, countingBucket, type ReleaseObjects, type StepOutcome } from "./build.ts";
import { type BuildReport, type BuildWork, noBuildWork } from "./build-report.ts";
import { BUILD_LIMITS, type BuildDeps } from "./limits.ts";
import { readPointer } from "./manifest.ts";

/**
 * The one object that builds the catalogue snapshot (one instance, "catalogue"). Ingestion pokes it
 * after each commit; a poke only arms an alarm COALESCE_MS ahead unless one is armed already, so a
 * burst of ingestions costs one build. Each alarm runs ONE bounded step (src/catalogue/snapshot/build.ts) and,
 * while work is left, arms the next alarm at once: no invocation's work grows with the catalogue. A
 * step that throws is retried by the alarm's own retries from the progress recorded in storage, and
 * the cron sweep's poke (sweepSnapshot) heals a lost poke: the changes are marked in D1, not in the poke.
 */
const COALESCE_MS = 300;
/**
 * A replaced snapshot's objects stay readable this long after it was replaced, so a response that
 * began on it (a slow client reading a whole catalogue) can finish (docs/catalogue.md, "Retention").
 */
export const RETENTION_MS = DAY_MS;

/** Objects released by a build, deleted RETENTION_MS after `at`; keyed so storage lists them oldest first. */
interface Released {
  at: number;
  keys: string[];
}
const RELEASED_PREFIX = "released:";
/** One R2 delete takes at most 1,000 keys: an entry holds at most that many, and a clean-up step deletes one entry. */
const KEYS_PER_ENTRY = 1000;

/** Records a build's released objects, the replaced manifest last (so it is deleted last), in entries of KEYS_PER_ENTRY. */
export const releaseObjects: ReleaseObjects = async (storage, { build, keys, at }) => {
  for (let i = 0; i < keys.length; i += KEYS_PER_ENTRY) {
    const entry: Released = { at, keys: keys.slice(i, i + KEYS_PER_ENTRY) };
    await storage.put(`${RELEASED_PREFIX}${String(at).padStart(15, "0")}:${build}:${String(i / KEYS_PER_ENTRY).padStart(5, "0")}`, entry);
  }
};

/**
 * One bounded clean-up step: deletes the oldest entry of released objects once RETENTION_MS has
 * passed since its release. Returns whether it deleted anything (so another entry may be due).
 */
export async function collectStep(bucket: R2Bucket, storage: BuilderStorage, now = Date.now()): Promise<boolean> {
  const [entry] = await storage.list<Released>({ prefix: RELEASED_PREFIX, limit: 1 });
  if (!entry || now - entry[1].at <= RETENTION_MS) return false;
  await bucket.delete(entry[1].keys);
  await storage.delete(entry[0]);
  return true;
}

/** A currency and form whose converted whole list the builder keeps warm (keepConvertedWarm), under warmKey. */
interface WarmEntry {
  askedAt: number;
  known?: WarmPieces;
}
const WARM_PREFIX = "warm:";
const warmKey = (currency: string, form: "json" | "ndjson") => `${WARM_PREFIX}${currency}:${form}`;
/** Segments a warm step converts at most: about 5,000 products, a build step's work. */
const WARM_SEGMENTS_PER_STEP = 5;

export class CatalogueBuilder extends MeteredObject {
  #running: Promise<unknown> = Promise.resolve();

  async poke(): Promise<ObjectAnswer> {
    await this.#arm();
    return this.reported({});
  }

  /**
   * A converted whole list was asked for (src/catalogue/converted-list.ts): from now on, for a day, the builder converts
   * that currency's pieces after each build and after new rates, in steps of its own, so responses find them.
   */
  async keepConvertedWarm(currency: string, form: "json" | "ndjson"): Promise<ObjectAnswer> {
    const key = warmKey(currency, form);
    const entry = await this.ctx.storage.get<WarmEntry>(key);
    await this.ctx.storage.put(key, { ...entry, askedAt: Date.now() } satisfies WarmEntry);
    await this.#arm();
    return this.reported({});
  }

  async #arm(): Promise<void> {
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + COALESCE_MS);
  }

  /** Each step is an invocation of its own, logged as `catalogue_build_step` with its work. */
  override alarm(): Promise<void> {
    return this.invocation("catalogue_build_step", async () => {
      if (await this.#serial(() => this.#step(noBuildWork()))) await this.ctx.storage.setAlarm(Date.now());
    });
  }

  /**
   * For a request that found no snapshot at all: builds the first one at once when the catalogue is
   * empty (one D1 read, nothing to write but the manifest); otherwise pokes and returns false, as a
   * request never waits for a build of products.
   */
  async ensureSnapshot(): Promise<{ ready: boolean } & ObjectAnswer> {
    if (await readPointer(this.env.CATALOGUE)) return this.reported({ ready: true });
    const [anyProduct] = await this.meter.database(this.env.DB).select({ id: products.id }).from(products).limit(1);
    if (anyProduct) {
      await this.#arm();
      return this.reported({ ready: false });
    }
    await this.#buildAll();
    return this.reported({ ready: true });
  }

  /**
   * Runs steps now until the snapshot holds the catalogue version, then the clean-up steps that are
   * due: what the alarms would do one step at a time. For the first, empty, snapshot (ensureSnapshot),
   * which a request waits for; the tests call it too, to finish at once the build an ingestion started. Called so,
   * it is an invocation of its own (`catalogue_build`), so its work never rides on the builder's next answer.
   */
  async build(): Promise<BuildReport> {
    let report: BuildReport | undefined;
    await this.invocation("catalogue_build", async () => {
      report = await this.#buildAll();
    });
    return report!;
  }

  #buildAll(): Promise<BuildReport> {
    return this.#serial(async () => {
      let last: BuildReport | undefined;
      for (;;) {
        const outcome = await this.#buildStep();
        if (outcome.status === "building") continue;
        if (outcome.status === "current") {
          last ??= outcome.report;
          break;
        }
        last = outcome.report;
      }
      while (await this.#collect()) {}
      return last;
    });
  }

  #serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#running.then(task);
    this.#running = run.catch(() => undefined);
    return run;
  }

  /** One step: of the build in progress or due, else of the clean-up, else of the converted lists kept warm. True when more work is waiting. */
  async #step(work: BuildWork): Promise<boolean> {
    const outcome = await this.#buildStep(work);
    if (outcome.status !== "current") return true;
    return (await this.#collect()) || this.#warmStep();
  }

  /** Converts the next pieces of the first currency kept warm that lacks some; forgets a currency not asked for in a day. */
  async #warmStep(): Promise<boolean> {
    const bucket = this.meter.bucket(this.env.CATALOGUE);
    const entries = [...(await this.ctx.storage.list<WarmEntry>({ prefix: WARM_PREFIX }))];
    const stale = entries.filter(([, entry]) => Date.now() - entry.askedAt > DAY_MS).map(([key]) => key);
    if (stale.length > 0) await this.ctx.storage.delete(stale);
    const warm = entries.filter(([key]) => !stale.includes(key));
    const pointer = warm.length > 0 ? await readPointer(bucket) : null;
    if (!pointer) return false;
    // Once a step, whatever the currencies: the snapshot (the one the last build left in this isolate) and the rates.
    const [manifest, rates] = await Promise.all([
      cachedManifest(bucket, pointer.manifest),
      todaysRates(this.meter.database(this.env.DB), bucket),
    ]);
    for (const [key, entry] of warm) {
      const [currency, form] = key.slice(WARM_PREFIX.length).split(":") as [string, "json" | "ndjson"];
      const conversion = conversionInto(currency, rates);
      const { known, more } = await warmStep(bucket, manifest, conversion, form, entry.known, WARM_SEGMENTS_PER_STEP);
      if (JSON.stringify(known) !== JSON.stringify(entry.known)) await this.ctx.storage.put(key, { ...entry, known } satisfies WarmEntry);
      if (more) return true;
    }
    return false;
  }

  async #buildStep(work = noBuildWork()): Promise<StepOutcome> {
    // Counted twice over: in the step's own report (`work`), and in the tally of the invocation it runs for (`meter`).
    const deps: BuildDeps = {
      db: database(this.meter.d1Binding(this.env.DB), work),
      bucket: countingBucket(this.meter.bucket(this.env.CATALOGUE), work),
      storage: this.ctx.storage,
      work,
      limits: BUILD_LIMITS,
    };
    const outcome = await buildStep(deps, releaseObjects);
    if (outcome.status === "built") console.log(JSON.stringify({ level: "info", event: "catalogue_build", ...outcome.report }));
    return outcome;
  }

  #collect(): Promise<boolean> {
    return collectStep(this.meter.bucket(this.env.CATALOGUE), this.ctx.storage);
  }
}
