import { DurableObject } from "cloudflare:workers";
import { database } from "../platform/db.ts";
import { products } from "../platform/tables.ts";
import { type BuildOptions, type BuildReport, buildSnapshot, readManifest, readPointer } from "./build.ts";
import { LEGACY_POINTER_KEY, manifestKey } from "./manifest.ts";

/**
 * The one object that builds the catalogue snapshot (one instance, "catalogue"). Ingestion pokes it
 * after each commit; a poke only arms an alarm COALESCE_MS ahead unless one is armed already, so a
 * burst of ingestions costs one build. A build that throws is retried by the alarm's own retries, and
 * the cron sweep's poke (sweepCatalogue) heals a lost poke: the changes are marked in D1, not in the poke.
 */
const COALESCE_MS = 300;
/** A replaced snapshot's objects stay this long, so responses streaming it can finish. */
export const GRACE_MS = 10 * 60_000;

interface Retired {
  manifest: string;
  at: number;
}

export class CatalogueBuilder extends DurableObject<Env> {
  #running: Promise<unknown> = Promise.resolve();

  async poke(): Promise<void> {
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + COALESCE_MS);
  }

  override async alarm(): Promise<void> {
    await this.build();
  }

  /**
   * For a request that found no snapshot at all: builds the first one at once when the catalogue is
   * empty (one D1 read, nothing to write but the manifest); otherwise pokes and returns false, as a
   * request never waits for a build of products.
   */
  async ensureSnapshot(): Promise<boolean> {
    if (await readPointer(this.env.CATALOGUE)) return true;
    const [anyProduct] = await database(this.env.DB).select({ id: products.id }).from(products).limit(1);
    if (anyProduct) {
      await this.poke();
      return false;
    }
    await this.build();
    return true;
  }

  /** Builds now (tests, the seed), after any build already running. */
  build(options: BuildOptions = {}): Promise<BuildReport> {
    const run = this.#running.then(() => this.#buildAndCollect(options));
    this.#running = run.catch(() => undefined);
    return run;
  }

  async #buildAndCollect(options: BuildOptions): Promise<BuildReport> {
    // What this build replaces is what the pointer names: it and the builder's own records cannot disagree.
    const bucket = this.env.CATALOGUE;
    const current = await readPointer(bucket);
    const legacy = current ? null : await readPointer(bucket, LEGACY_POINTER_KEY);
    const before = (current ?? legacy)?.manifest ?? null;
    const report = await buildSnapshot(this.env, options);
    if (!report.built) return report;
    if (legacy) await bucket.delete(LEGACY_POINTER_KEY); // its snapshot is retired below, like any replaced one
    console.log(JSON.stringify({ level: "info", event: "catalogue_build", ...report }));
    const retired = (await this.ctx.storage.get<Retired[]>("retired")) ?? [];
    if (before !== null) retired.push({ manifest: before, at: Date.now() });
    // Recorded before collecting, so a collection that fails loses no entry: the next build's collection retries it.
    await this.ctx.storage.put("retired", retired);
    try {
      await this.ctx.storage.put("retired", await this.#collect(report.manifest!, retired));
    } catch (error) {
      // The snapshot is built and serving; only the clean-up waits for the next build.
      console.error(JSON.stringify({ level: "error", event: "catalogue_collect_failed", error: String(error) }));
    }
    return report;
  }

  /**
   * Deletes the objects of snapshots retired over GRACE_MS ago that no kept snapshot shares (segments
   * first, the manifest last); returns the entries kept. Throws, deleting nothing, when a kept
   * snapshot's manifest cannot be read: what it shares is then unknown.
   */
  async #collect(current: string, retired: readonly Retired[]): Promise<Retired[]> {
    const bucket = this.env.CATALOGUE;
    const expired = retired.filter((entry) => Date.now() - entry.at > GRACE_MS);
    if (expired.length === 0) return [...retired];
    const kept = retired.filter((entry) => !expired.includes(entry));
    const inUse = new Set<string>();
    for (const id of [current, ...kept.map((entry) => entry.manifest)]) {
      for (const segment of (await readManifest(bucket, id)).segments) inUse.add(segment.json.key).add(segment.ndjson.key);
    }
    for (const { manifest: id } of expired) {
      // A manifest already gone (an earlier collection deleted it and stopped before recording so) has nothing left to delete;
      // one that is there but could not be read stops the collection, its entry kept for the next one.
      const manifest = await readManifest(bucket, id).catch(async (error: unknown) => {
        if (await bucket.head(manifestKey(id))) throw error;
        return null;
      });
      const keys = (manifest?.segments ?? []).flatMap((segment) => [segment.json.key, segment.ndjson.key]).filter((key) => !inUse.has(key));
      for (let i = 0; i < keys.length; i += 1000) await bucket.delete(keys.slice(i, i + 1000));
      await bucket.delete(manifestKey(id));
    }
    return kept;
  }
}
