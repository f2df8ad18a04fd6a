import { and, asc, eq, gt, sql } from "drizzle-orm";
import { onForget } from "../../platform/isolate-memory.ts";
import { meteredBucket } from "../../platform/metered.ts";
import { catalogueState, competitors, products } from "../../platform/tables.ts";
import { type BuildReport, type BuildWork, noBuildWork } from "./build-report.ts";
import { compactTo, extentCap } from "./compaction.ts";
import { valuesKey, writeDirectory } from "./directory.ts";
import { competitorNames, encode, encodeParts, pageStatements, RANGES_PER_STATEMENT } from "./encode.ts";
import { concatenated } from "./gzip-member.ts";
import { findChanges, rewriteSegments, type SegmentChanges } from "./incremental.ts";
import { type BuildDeps, STEP_D1_STATEMENTS, STEP_R2_READS } from "./limits.ts";
import {
  bodyParts,
  competitorViews,
  directoryKey,
  findManifest,
  type Manifest,
  manifestKey,
  POINTER_KEY,
  type Pointer,
  readManifest,
  readPointer,
  type Segment,
  segmentIndexOf,
  snapshotObjects,
  stepKeys,
} from "./manifest.ts";
import { assembleSegment, StepObjects } from "./segments.ts";
import { appendPieces, compactLists, putLists } from "./value-lists.ts";

/**
 * Builds catalogue snapshots into R2 in bounded, resumable steps (docs/catalogue.md, "Who builds").
 * Run only by the CatalogueBuilder object, one step at a time. A step does a bounded amount of work
 * (BuildLimits: a few segments, a few thousand products encoded, at most STEP_D1_STATEMENTS D1 statements),
 * writes its objects to R2, then records its progress in the object's storage in one write: a step
 * that dies is done again from the last recorded progress, never from the start. The pointer moves
 * in the last step, once every segment and the manifest are written.
 *
 * The unit of the manifest is a segment (about segmentTarget products); the unit of recompression is
 * a part (about partTarget products, raw deflate ending in a sync flush); the unit of storage is what
 * a step writes (one object per form holding the parts it encoded). A segment's form is a list of
 * byte ranges (extents) of those objects. An incremental build re-encodes only the parts holding
 * changed products, writes just those, and keeps the other parts where they are, so a change
 * scattered over the catalogue costs the parts it touches. A segment whose form would need more than
 * its extent cap (extentCap) ranges is compacted: its shortest kept runs copied into the step's objects.
 * An incremental step reads what its segments need together (one D1 batch for their changed ids
 * beside their part indexes, one for the changed parts' products), so it waits on I/O a few times,
 * not a few times per segment.
 *
 * This file holds the steps and their recorded progress; the rest of the build is beside it:
 * limits.ts (the budgets, what a step works with), encode.ts (products read from D1 and encoded as
 * parts), segments.ts (parts put together as segments, a step's objects), incremental.ts (a changed
 * segment rewritten) and compaction.ts (a segment's ranges bounded).
 */

/** Pages of segmentTarget changed ids a scan step reads at most. */
const SCAN_PAGES = 100;

export type StepOutcome = { status: "current"; report: BuildReport } | { status: "building" } | { status: "built"; report: BuildReport };

/** The build in progress, in the object's storage under BUILD_KEY; each rewritten segment's result under builtKey(n). */
interface BuildState {
  id: string;
  version: number;
  startedAt: number;
  full: boolean;
  /** The manifest the pointer named when the build began: what it replaces, and what an incremental build starts from. */
  previous: string | null;
  /** The previous snapshot's version: an incremental build rewrites what changed after it. */
  base: number;
  phase: "scan" | "segments" | "lists" | "finish";
  /** Scan: the last changed product read, in (changed_version, id) order. */
  scanAfter: { changedVersion: number; id: string };
  /** Scan: changed ids read (MAX_SAFE_INTEGER when it stopped early, every segment holding a change). */
  changes: number;
  /** Incremental: the previous snapshot's segments holding a change, in order; `position` of them are rewritten. */
  dirty: number[];
  /** Full: segments written, and the last product id written (null before the first segment). */
  position: number;
  cursor: string | null;
  steps: number;
  work: BuildWork;
  largestStep: BuildWork & { ms: number };
}

const BUILD_KEY = "build";
/** The manifest whose segments' part indexes the builder's storage holds: an incremental build needs them, else it is full. */
const INDEXED_KEY = "indexed";
const BUILT_PREFIX = "built:";
const builtKey = (n: number) => `${BUILT_PREFIX}${String(n).padStart(7, "0")}`;

/** The last manifest read by this isolate's builder: manifests are immutable, and every step of an incremental build (and of keeping converted lists warm) needs it. */
let manifestCache: Manifest | undefined;
onForget(() => {
  manifestCache = undefined;
});
export async function cachedManifest(bucket: R2Bucket, id: string): Promise<Manifest> {
  if (manifestCache?.id !== id) manifestCache = await readManifest(bucket, id);
  return manifestCache;
}

/** An R2 bucket counting its reads and writes into `work` (what a step reports). */
export const countingBucket = (bucket: R2Bucket, work: Pick<BuildWork, "r2Reads" | "r2Writes">): R2Bucket =>
  meteredBucket(bucket, (_operation, method) => {
    if (method === "put" || method === "delete") work.r2Writes++;
    else work.r2Reads++;
  });

// ---- The steps ------------------------------------------------------------------------------------------

/**
 * The first step: nothing when the snapshot holds the catalogue version; otherwise a new build, full
 * for the first snapshot or after a reset (`reset_version`, moved by the seed and by a competitor's
 * rename), else incremental from the snapshot the pointer names.
 */
async function startBuild(deps: BuildDeps, now: number): Promise<BuildState | { current: Pointer | null; version: number }> {
  const { db, bucket } = deps;
  const [state] = await db.select().from(catalogueState).where(eq(catalogueState.id, 1));
  const version = state?.version ?? 0;
  const pointer = await readPointer(bucket);
  if (pointer && pointer.version >= version) return { current: pointer, version };
  const previous = pointer ? await cachedManifest(bucket, pointer.manifest) : null;
  const indexed = (await deps.storage.get<string>(INDEXED_KEY)) === pointer?.manifest;
  const full = !previous || !indexed || previous.segments.length === 0 || (state?.resetVersion ?? 0) > previous.version;
  return {
    id: `${version}-${now.toString(36)}-${crypto.randomUUID().slice(0, 8)}`,
    version,
    startedAt: now,
    full,
    previous: pointer?.manifest ?? null,
    base: previous?.version ?? 0,
    phase: full ? "segments" : "scan",
    scanAfter: { changedVersion: previous?.version ?? 0, id: "\uffff" },
    changes: 0,
    dirty: [],
    position: 0,
    cursor: null,
    steps: 0,
    work: noBuildWork(),
    largestStep: { ...noBuildWork(), ms: 0 },
  };
}

/** Scan: the previous snapshot's segments holding a product changed after it, a page of ids at a time, SCAN_PAGES pages a step. */
async function scan(deps: BuildDeps, state: BuildState): Promise<void> {
  const previous = await cachedManifest(deps.bucket, state.previous!);
  const base = state.base;
  const dirty = new Set(state.dirty);
  for (let page = 0; page < SCAN_PAGES; page++) {
    // Keyset pages in (changed_version, id) order: the index on those two columns, never a scan of products.
    const rows = await deps.db
      .select({ id: products.id, changedVersion: products.changedVersion })
      .from(products)
      .where(
        and(
          gt(products.changedVersion, base),
          sql`(${products.changedVersion}, ${products.id}) > (${state.scanAfter.changedVersion}, ${state.scanAfter.id})`,
        ),
      )
      .orderBy(asc(products.changedVersion), asc(products.id))
      .limit(deps.limits.segmentTarget);
    for (const { id } of rows) dirty.add(segmentIndexOf(previous.segments, id));
    if (rows.length > 0) state.scanAfter = rows[rows.length - 1]!;
    state.changes += rows.length;
    // Once every segment holds a change, the rest of the scan would tell nothing more.
    const everySegment = dirty.size === previous.segments.length && rows.length === deps.limits.segmentTarget;
    if (rows.length < deps.limits.segmentTarget || everySegment) {
      if (everySegment) state.changes = Number.MAX_SAFE_INTEGER;
      Object.assign(state, { phase: dirty.size > 0 ? "segments" : "lists", dirty: [...dirty].sort((a, b) => a - b) });
      return;
    }
  }
  state.dirty = [...dirty].sort((a, b) => a - b);
}

/** Full build: the next segments of segmentTarget products, read in id order after the last one written. */
async function fullSegments(deps: BuildDeps, objects: StepObjects, state: BuildState): Promise<Record<string, Segment[]>> {
  const names = await competitorNames(deps);
  const written: Record<string, Segment[]> = {};
  const { limits } = deps;
  for (let n = 0; n < limits.stepSegments && deps.work.productsEncoded < limits.stepProducts; n++) {
    const [rows, offerRows] = await deps.db.batch(
      pageStatements(deps.db, limits.segmentTarget, state.cursor ?? "", state.cursor === null, null),
    );
    if (rows.length > 0) {
      const first = state.position === 0 ? "" : rows[0]!.id;
      const items = encode(rows, offerRows, names);
      objects.lists.add(items);
      const pieces = encodeParts(deps, first, items);
      // A page whose every product was left out (encode) makes no segment: the segment before covers its range.
      if (pieces.length > 0) {
        written[builtKey(state.position)] = [assembleSegment(deps, objects, first, pieces)];
        state.position++;
      }
      state.cursor = rows[rows.length - 1]!.id;
    }
    if (rows.length < limits.segmentTarget) {
      state.phase = "lists";
      break;
    }
  }
  return written;
}

/**
 * Incremental build: the next dirty segments rewritten, within the step's budgets. The next
 * stepSegments are looked at (their changed ids and part indexes); of those, the step takes as many
 * as fit its D1 statements, R2 reads (a compaction's copies) and stepProducts, all known once the part
 * indexes say which parts changed. At least one is taken, so a build always moves.
 */
async function incrementalSegments(deps: BuildDeps, objects: StepObjects, state: BuildState): Promise<Record<string, Segment[]>> {
  const { segments } = await cachedManifest(deps.bucket, state.previous!);
  const candidates = state.dirty.slice(state.position, state.position + deps.limits.stepSegments);
  let inRange = 0;
  for (let i = candidates[0]!; i <= candidates[candidates.length - 1]!; i++) inRange += segments[i]!.count;
  const [names, changes] = await Promise.all([
    competitorNames(deps),
    findChanges(deps, state.base, segments, candidates, state.changes < inRange),
  ]);
  const cap = extentCap(segments.length);
  const taken: SegmentChanges[] = [];
  let dirtyParts = 0;
  let reencoded = 0;
  let copyReads = 0;
  for (const change of changes) {
    const parts = dirtyParts + change.dirty.length;
    const products = reencoded + change.dirty.reduce((sum, j) => sum + change.parts[j]!.count, 0);
    const statements = deps.work.d1Statements + 2 * Math.ceil(parts / RANGES_PER_STATEMENT);
    // A compaction copies at most one kept run for each range above compactTo(cap), two reads each.
    const runs = segments[change.i]!.json.extents.length + 2 * change.dirty.length;
    const reads = copyReads + (runs > cap ? 2 * (runs - compactTo(cap)) : 0);
    const over = statements > STEP_D1_STATEMENTS || products > deps.limits.stepProducts || deps.work.r2Reads + reads > STEP_R2_READS;
    if (taken.length > 0 && over) break;
    taken.push(change);
    dirtyParts = parts;
    reencoded = products;
    copyReads = reads;
  }
  const rewritten = await rewriteSegments(deps, objects, segments, taken, names);
  const written: Record<string, Segment[]> = {};
  for (const [k, { i }] of taken.entries()) written[builtKey(i)] = rewritten[k]!;
  state.position += taken.length;
  if (state.position >= state.dirty.length) state.phase = "lists";
  return written;
}

/**
 * The last step: the manifest, then the pointer. Returns the manifest, the R2 objects of the replaced
 * snapshot it no longer uses, and the replaced snapshot's part indexes it no longer uses.
 */
async function finish(
  deps: BuildDeps,
  state: BuildState,
  now: number,
): Promise<{ manifest: Manifest; released: string[]; unindexed: string[] }> {
  const { bucket, db } = deps;
  const built = new Map<string, Segment[]>(await deps.storage.list<Segment[]>({ prefix: BUILT_PREFIX }));
  let segments: Segment[];
  if (state.full) segments = [...built.values()].flat();
  else {
    const previous = await cachedManifest(bucket, state.previous!);
    segments = previous.segments.flatMap((segment, i) => built.get(builtKey(i)) ?? [segment]);
  }
  if (segments[0]) segments[0] = { ...segments[0], first: "" };
  const competitorRows = await db.select().from(competitors).orderBy(asc(competitors.id));
  const manifest: Manifest = {
    id: state.id,
    version: state.version,
    builtAt: new Date(now).toISOString(),
    products: segments.reduce((sum, segment) => sum + segment.count, 0),
    segments,
    competitors: competitorViews(competitorRows, segments),
    body: { json: concatenated(bodyParts(segments, "json")), ndjson: concatenated(bodyParts(segments, "ndjson")) },
    ...(await writeDirectory(deps, state.id, segments)),
  };
  await bucket.put(manifestKey(state.id), JSON.stringify(manifest));
  await bucket.put(POINTER_KEY, JSON.stringify({ manifest: state.id, version: state.version } satisfies Pointer));
  manifestCache = manifest;
  let released: string[] = [];
  let unindexed: string[] = [];
  if (state.previous !== null) {
    // A replaced manifest already gone releases nothing more: what it used is unknown.
    const replaced = await findManifest(bucket, state.previous);
    const kept = new Set(snapshotObjects(manifest));
    released = replaced
      ? snapshotObjects(replaced).filter((key) => !kept.has(key))
      : [directoryKey(state.previous), manifestKey(state.previous)];
    const indexes = new Set(segments.map((segment) => segment.parts));
    unindexed = (replaced?.segments ?? [])
      .map((segment) => segment.parts)
      .filter((key) => !indexes.has(key))
      .flatMap((key) => [key, valuesKey(key)]);
  }
  return { manifest, released, unindexed };
}

/** A step's work added to the build's totals, and kept as the largest step when it made the most D1 statements. */
function account(state: BuildState, step: BuildWork, ms: number): void {
  state.steps++;
  for (const name of Object.keys(step) as (keyof BuildWork)[]) state.work[name] += step[name];
  if (step.d1Statements > state.largestStep.d1Statements) state.largestStep = { ...step, ms: Math.max(ms, state.largestStep.ms) };
  else state.largestStep.ms = Math.max(ms, state.largestStep.ms);
}

function reportOf(state: BuildState, manifest: Manifest, now: number): BuildReport {
  return {
    built: true,
    manifest: manifest.id,
    version: state.version,
    full: state.full,
    segmentsWritten: state.work.segmentsWritten,
    products: manifest.products,
    ms: now - state.startedAt,
    steps: state.steps,
    work: state.work,
    largestStep: state.largestStep,
  };
}

/** The object's storage as a step writes it (a transaction's too). */
export type BuilderStorage = Pick<DurableObjectTransaction, "get" | "put" | "delete" | "list">;

/**
 * Told, in the last step's storage transaction, the objects of the replaced snapshot that the new one
 * does not use: from then on no new snapshot uses them (a build copies only what the snapshot it
 * replaces uses), so they can go once no response can still be reading the replaced snapshot.
 */
export type ReleaseObjects = (storage: BuilderStorage, released: { build: string; keys: string[]; at: number }) => Promise<void>;

/**
 * One bounded step of the build in progress, or of a new one when the catalogue moved past the
 * snapshot. Its progress is recorded in `deps.storage` in one write at its end (with what it built),
 * so a step that throws anywhere is done again by the next call, from where the last one ended.
 */
export async function buildStep(deps: BuildDeps, onReleased: ReleaseObjects, now = Date.now()): Promise<StepOutcome> {
  let state = await deps.storage.get<BuildState>(BUILD_KEY);
  if (!state) {
    const started = await startBuild(deps, now);
    if (!("id" in started)) {
      return {
        status: "current",
        report: {
          built: false,
          manifest: started.current?.manifest ?? null,
          version: started.version,
          full: false,
          segmentsWritten: 0,
          products: 0,
          ms: 0,
          steps: 1,
          work: { ...deps.work },
          largestStep: { ...deps.work, ms: 0 },
        },
      };
    }
    state = started;
  }
  if (state.phase === "scan") await scan(deps, state);
  else if (state.phase === "segments") {
    const objects = new StepObjects(state.id, state.steps);
    const fresh = state.full && state.steps === 0;
    const written = state.full ? await fullSegments(deps, objects, state) : await incrementalSegments(deps, objects, state);
    const pieces = await objects.write(deps);
    account(state, deps.work, Date.now() - now);
    await deps.storage.transaction(async (txn) => {
      await appendPieces(txn, pieces, fresh);
      await txn.put({ ...written, ...objects.partIndexes, [BUILD_KEY]: state });
    });
    return { status: "building" };
  } else if (state.phase === "lists") {
    const { updated, done } = await compactLists(deps, stepKeys(state.id, state.steps).lists, STEP_R2_READS);
    if (done) state.phase = "finish";
    account(state, deps.work, Date.now() - now);
    await deps.storage.transaction(async (txn) => {
      await putLists(txn, updated);
      await txn.put(BUILD_KEY, state);
    });
    return { status: "building" };
  } else {
    const { manifest, released, unindexed } = await finish(deps, state, now);
    account(state, deps.work, Date.now() - now);
    const report = reportOf(state, manifest, Date.now());
    await deps.storage.transaction(async (txn) => {
      await onReleased(txn, { build: state.id, keys: released, at: now });
      // Only builds read part indexes, and only the current snapshot's: the replaced one's go at once.
      const keys = [...(await txn.list({ prefix: BUILT_PREFIX })).keys(), BUILD_KEY, ...unindexed];
      for (let i = 0; i < keys.length; i += 128) await txn.delete(keys.slice(i, i + 128));
      await txn.put(INDEXED_KEY, manifest.id);
    });
    return { status: "built", report };
  }
  account(state, deps.work, Date.now() - now);
  await deps.storage.put(BUILD_KEY, state);
  return { status: "building" };
}
