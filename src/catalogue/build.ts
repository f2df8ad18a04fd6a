import { and, asc, eq, gt, gte, inArray, lt, or, type SQL, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { catalogueState, competitors, offers, products } from "../platform/tables.ts";
import { type BuildReport, type BuildWork, noBuildWork } from "./build-report.ts";
import { type Checked, concatenated, deflatePart } from "./gzip-member.ts";
import {
  bodyParts,
  JSON_SEPARATOR,
  LEGACY_POINTER_KEY,
  MAX_SUMMARY_VALUES,
  type Manifest,
  manifestKey,
  type Part,
  PartIndex,
  POINTER_KEY,
  type Pointer,
  type Segment,
  type Summary,
  segmentIndexOf,
  segmentKeys,
} from "./manifest.ts";
import type { CompetitorView } from "./schema.ts";
import { type CompetitorRow, type OfferRow, productView } from "./views.ts";

/**
 * Builds catalogue snapshots into R2 in bounded, resumable steps (docs/catalogue.md, "Who builds").
 * Run only by the CatalogueBuilder object, one step at a time. A step does a bounded amount of work
 * (BuildLimits: a few segments, a few thousand products encoded, at most STEP_D1_STATEMENTS D1 statements),
 * writes its objects to R2, then records its progress in the object's storage in one write: a step
 * that dies is done again from the last recorded progress, never from the start. The pointer moves
 * in the last step, once every segment and the manifest are written.
 *
 * The unit of storage is a segment (one R2 object per form, about segmentTarget products); the unit
 * of recompression is a part (about partTarget products, raw deflate ending in a sync flush). An
 * incremental build re-encodes only the parts holding changed products and copies the other parts'
 * compressed bytes as they are, so a change scattered over the catalogue costs the parts it touches.
 */

/**
 * The sizes a build works with. Production uses BUILD_LIMITS; the tests pass smaller ones (through
 * BuildDeps) to get builds of many steps out of a few hundred products.
 */
export interface BuildLimits {
  /** Products per part in a full build; a re-encoded part over twice this is split into parts of this size. */
  partTarget: number;
  /** Products per segment in a full build, and per page read from D1; a rewritten segment over twice this is split. */
  segmentTarget: number;
  /** A step starts no segment once it encoded this many products (locally about 0.1 ms of CPU each: D1 rows, JSON, deflate). */
  stepProducts: number;
  /** Segments a step writes at most. */
  stepSegments: number;
}
export const BUILD_LIMITS: BuildLimits = { partTarget: 25, segmentTarget: 1000, stepProducts: 5000, stepSegments: 16 };
export const SEGMENT_TARGET = BUILD_LIMITS.segmentTarget;
export const SEGMENT_MAX = 2 * SEGMENT_TARGET;
/**
 * D1 statements a step makes at most (D1 allows 1,000 an invocation): stepSegments segments of at most
 * SEGMENT_D1_STATEMENTS each, plus the competitors, the catalogue state and the replaced manifest's check;
 * a scan step makes at most SCAN_PAGES and a full-build step two a segment.
 */
export const STEP_D1_STATEMENTS = 150;
/** Pages of segmentTarget changed ids a scan step reads at most. */
const SCAN_PAGES = 100;
/**
 * A rewritten segment's statements: its changed ids, then two per RANGES_PER_STATEMENT changed parts
 * (a segment of up to 2,000 products has at most 80 parts of 25: four pairs).
 */
const SEGMENT_D1_STATEMENTS = 1 + 2 * 4;

export { type BuildReport, type BuildWork, noBuildWork };

/** What a step works with: the object's storage for progress, and D1 and R2 (counting into `work`). Tests pass failing ones. */
export interface BuildDeps {
  db: Database;
  bucket: R2Bucket;
  storage: DurableObjectStorage;
  work: BuildWork;
  limits: BuildLimits;
}

export type StepOutcome = { status: "current"; report: BuildReport } | { status: "building" } | { status: "built"; report: BuildReport };

/** The build in progress, in the object's storage under BUILD_KEY; each rewritten segment's result under builtKey(n). */
interface BuildState {
  id: string;
  version: number;
  startedAt: number;
  full: boolean;
  /** The manifest the pointer named when the build began: what it replaces, and what an incremental build starts from. */
  previous: string | null;
  /** `previous` is a snapshot of the first layout (its pointer is LEGACY_POINTER_KEY). */
  legacy: boolean;
  /** The previous snapshot's version: an incremental build rewrites what changed after it. */
  base: number;
  phase: "scan" | "segments" | "finish";
  /** Scan: the last changed product read, in (changed_version, id) order. */
  scanAfter: { changedVersion: number; id: string };
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
const BUILT_PREFIX = "built:";
const builtKey = (n: number) => `${BUILT_PREFIX}${String(n).padStart(7, "0")}`;

interface Encoded {
  id: string;
  json: string;
  brand: string | null;
  category: string | null;
  updatedAt: string;
  competitorIds: string[];
}

/** A part ready to be written: its index entry and each form's compressed bytes (new, or copied from the old object). */
interface Piece {
  part: Part;
  json: Uint8Array;
  ndjson: Uint8Array;
}

export async function readPointer(bucket: R2Bucket, key = POINTER_KEY): Promise<Pointer | null> {
  const object = await bucket.get(key);
  return object ? ((await object.json()) as Pointer) : null;
}

export async function readManifest(bucket: R2Bucket, id: string): Promise<Manifest> {
  const object = await bucket.get(manifestKey(id));
  if (!object) throw new Error(`The catalogue manifest ${id} is missing from R2`);
  return (await object.json()) as Manifest;
}

/** The last manifest read by this isolate's builder: manifests are immutable, and every step of an incremental build needs its base. */
let manifestCache: Manifest | undefined;
async function cachedManifest(bucket: R2Bucket, id: string): Promise<Manifest> {
  if (manifestCache?.id !== id) manifestCache = await readManifest(bucket, id);
  return manifestCache;
}

/** An R2 bucket counting its reads and writes into `work` (what a step reports). */
export function countingBucket(bucket: R2Bucket, work: Pick<BuildWork, "r2Reads" | "r2Writes">): R2Bucket {
  return new Proxy(bucket, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (property === "get" || property === "head" || property === "list") work.r2Reads++;
      if (property === "put" || property === "delete") work.r2Writes++;
      return value.bind(target);
    },
  });
}

// ---- Reading products ------------------------------------------------------------------------------

/** The products of an id range, in id order, a page at most, and their offers: two statements. */
function pageQueries(db: Database, page: number, from: string, inclusive: boolean, below: string | null) {
  const range = and(inclusive ? gte(products.id, from) : gt(products.id, from), below === null ? undefined : lt(products.id, below)) as SQL;
  const ids = db.select({ id: products.id }).from(products).where(range).orderBy(asc(products.id)).limit(page);
  return [
    db.select().from(products).where(range).orderBy(asc(products.id)).limit(page),
    db.select().from(offers).where(inArray(offers.productId, ids)).orderBy(asc(offers.productId), asc(offers.competitorId)),
  ] as const;
}

type ProductRow = typeof products.$inferSelect;

function encode(rows: readonly ProductRow[], offerRows: readonly OfferRow[], names: ReadonlyMap<string, CompetitorRow>): Encoded[] {
  const byProduct = new Map<string, OfferRow[]>();
  for (const row of offerRows) {
    let list = byProduct.get(row.productId);
    if (!list) byProduct.set(row.productId, (list = []));
    list.push(row);
  }
  return rows.map((row) => {
    const own = byProduct.get(row.id) ?? [];
    return {
      id: row.id,
      json: JSON.stringify(productView(row, own, names)),
      brand: row.brand?.toLowerCase() ?? null,
      category: row.category?.toLowerCase() ?? null,
      updatedAt: row.updatedAt,
      competitorIds: own.map((offer) => offer.competitorId),
    };
  });
}

interface Range {
  first: string;
  below: string | null;
}

/** Every product of a range, a page at a time. */
async function readRange(deps: BuildDeps, range: Range, names: ReadonlyMap<string, CompetitorRow>): Promise<Encoded[]> {
  const { db } = deps;
  const page = deps.limits.segmentTarget;
  const items: Encoded[] = [];
  for (let from = range.first, inclusive = true; ; inclusive = false) {
    const [rows, offerRows] = await db.batch(pageQueries(db, page, from, inclusive, range.below));
    items.push(...encode(rows, offerRows, names));
    if (rows.length < page) return items;
    from = rows[rows.length - 1]!.id;
  }
}

/** Id ranges per statement when several are read at once: two bound parameters each, well under D1's 100. */
const RANGES_PER_STATEMENT = 24;

/**
 * Every product of several ranges (a segment's changed parts), in one batch: per RANGES_PER_STATEMENT
 * ranges, one statement for the products and one for their offers. A part holds a few dozen products,
 * so no page limit is needed; reading only the changed parts is what keeps a scattered change's D1
 * reads proportional to it.
 */
async function readRanges(deps: BuildDeps, ranges: readonly Range[], names: ReadonlyMap<string, CompetitorRow>): Promise<Encoded[]> {
  const { db } = deps;
  const queries = [];
  for (let i = 0; i < ranges.length; i += RANGES_PER_STATEMENT) {
    const inRanges = or(
      ...ranges
        .slice(i, i + RANGES_PER_STATEMENT)
        .map((range) => and(gte(products.id, range.first), range.below === null ? undefined : lt(products.id, range.below))),
    );
    queries.push(
      db.select().from(products).where(inRanges).orderBy(asc(products.id)),
      db
        .select()
        .from(offers)
        .where(inArray(offers.productId, db.select({ id: products.id }).from(products).where(inRanges)))
        .orderBy(asc(offers.productId), asc(offers.competitorId)),
    );
  }
  const results = (await db.batch(queries as unknown as Parameters<typeof db.batch>[0])) as unknown as unknown[][];
  const items: Encoded[] = [];
  for (let k = 0; k < results.length; k += 2) items.push(...encode(results[k] as ProductRow[], results[k + 1] as OfferRow[], names));
  return items;
}

async function competitorNames(deps: BuildDeps): Promise<Map<string, CompetitorRow>> {
  const rows = await deps.db.select().from(competitors).orderBy(asc(competitors.id));
  return new Map(rows.map((row) => [row.id, row]));
}

// ---- Parts and segments ------------------------------------------------------------------------------

const valueSet = (values: Iterable<string | null>) => {
  const set = new Set<string>();
  for (const value of values) if (value !== null) set.add(value);
  return set.size > MAX_SUMMARY_VALUES ? null : [...set].sort();
};

/** Products as one part whose range starts at `first`. */
function encodePart(first: string, items: readonly Encoded[], work: BuildWork): Piece {
  const json = deflatePart(items.map((item) => item.json).join(","));
  const ndjson = deflatePart(items.map((item) => `${item.json}\n`).join(""));
  work.partsEncoded++;
  work.productsEncoded += items.length;
  const offerCounts: Record<string, number> = {};
  for (const item of items) for (const id of item.competitorIds) offerCounts[id] = (offerCounts[id] ?? 0) + 1;
  return {
    part: {
      first,
      count: items.length,
      json: { bytes: json.bytes.length, crc: json.crc, length: json.length },
      ndjson: { bytes: ndjson.bytes.length, crc: ndjson.crc, length: ndjson.length },
      maxUpdatedAt: items.reduce((max, item) => (item.updatedAt > max ? item.updatedAt : max), ""),
      brands: valueSet(items.map((item) => item.brand)),
      categories: valueSet(items.map((item) => item.category)),
      offers: offerCounts,
    },
    json: json.bytes,
    ndjson: ndjson.bytes,
  };
}

/** Products of a range starting at `first` as parts: one part up to twice partTarget, else parts of partTarget. */
function encodeParts({ limits, work }: BuildDeps, first: string, items: readonly Encoded[]): Piece[] {
  const size = limits.partTarget;
  if (items.length === 0) return [];
  if (items.length <= 2 * size) return [encodePart(first, items, work)];
  const pieces: Piece[] = [];
  for (let start = 0; start < items.length; start += size)
    pieces.push(encodePart(start === 0 ? first : items[start]!.id, items.slice(start, start + size), work));
  return pieces;
}

/** The union of the parts' summaries; a value set over MAX_SUMMARY_VALUES (or one already unknown) is null. */
function mergedSummary(parts: readonly Part[]): Summary {
  const union = (sets: (string[] | null)[]) => {
    if (sets.some((set) => set === null)) return null;
    return valueSet(sets.flat());
  };
  const offerCounts: Record<string, number> = {};
  for (const part of parts) for (const [id, n] of Object.entries(part.offers)) offerCounts[id] = (offerCounts[id] ?? 0) + n;
  return {
    maxUpdatedAt: parts.reduce((max, part) => (part.maxUpdatedAt > max ? part.maxUpdatedAt : max), ""),
    brands: union(parts.map((part) => part.brands)),
    categories: union(parts.map((part) => part.categories)),
    offers: offerCounts,
  };
}

function joined(chunks: readonly Uint8Array[]): Uint8Array {
  const bytes = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}

/** A segment's JSON form: its parts' with a stored "," between each two (a part's JSON is its products joined by ","). */
const jsonPieces = (parts: readonly Checked[]): Checked[] => parts.flatMap((part, i) => (i === 0 ? [part] : [JSON_SEPARATOR, part]));

/** Writes one segment (both forms and its part index, three objects) starting at `first`; returns its manifest entry. */
async function writeSegment(deps: BuildDeps, buildId: string, label: string, first: string, pieces: readonly Piece[]): Promise<Segment> {
  const keys = segmentKeys(buildId, label);
  const parts = pieces.map((piece, i) => (i === 0 ? { ...piece.part, first } : piece.part));
  const json = joined(pieces.flatMap((piece, i) => (i === 0 ? [piece.json] : [JSON_SEPARATOR.bytes, piece.json])));
  const ndjson = joined(pieces.map((piece) => piece.ndjson));
  await Promise.all([
    deps.bucket.put(keys.json, json),
    deps.bucket.put(keys.ndjson, ndjson),
    deps.bucket.put(keys.parts, JSON.stringify(parts)),
  ]);
  deps.work.segmentsWritten++;
  return {
    first,
    count: parts.reduce((sum, part) => sum + part.count, 0),
    json: { key: keys.json, bytes: json.length, ...concatenated(jsonPieces(parts.map((part) => part.json))) },
    ndjson: { key: keys.ndjson, bytes: ndjson.length, ...concatenated(parts.map((part) => part.ndjson)) },
    parts: keys.parts,
    ...mergedSummary(parts),
  };
}

/** Pieces grouped into segments: one, or (over twice segmentTarget products) groups of about segmentTarget. */
function segmentGroups({ segmentTarget }: BuildLimits, pieces: readonly Piece[]): Piece[][] {
  const total = pieces.reduce((sum, piece) => sum + piece.part.count, 0);
  if (total <= 2 * segmentTarget) return pieces.length === 0 ? [] : [[...pieces]];
  const size = total / Math.ceil(total / segmentTarget);
  const groups: Piece[][] = [[]];
  let inGroup = 0;
  for (const piece of pieces) {
    if (inGroup >= size) {
      groups.push([]);
      inGroup = 0;
    }
    groups[groups.length - 1]!.push(piece);
    inGroup += piece.part.count;
  }
  return groups;
}

/** A previous segment's bytes, each form whole, and its part index (three reads at once). */
async function readSegment(bucket: R2Bucket, segment: Segment): Promise<{ parts: Part[]; json: Uint8Array; ndjson: Uint8Array }> {
  const [index, json, ndjson] = await Promise.all([
    bucket.get(segment.parts!),
    bucket.get(segment.json.key),
    bucket.get(segment.ndjson.key),
  ]);
  if (!index || !json || !ndjson) throw new Error(`An object of the catalogue segment ${segment.json.key} is missing from R2`);
  return {
    parts: PartIndex.parse(await index.json()),
    json: new Uint8Array(await json.arrayBuffer()),
    ndjson: new Uint8Array(await ndjson.arrayBuffer()),
  };
}

/**
 * Rewrites previous segment `i`: the parts holding a product changed after `base` are read from D1
 * and re-encoded, the others' bytes copied from the previous objects. Returns the segments replacing
 * it: usually one, none when it holds no product any more, several when it grew past twice segmentTarget.
 */
async function rewriteSegment(
  deps: BuildDeps,
  state: BuildState,
  previous: readonly Segment[],
  i: number,
  names: ReadonlyMap<string, CompetitorRow>,
): Promise<Segment[]> {
  const { db } = deps;
  const segment = previous[i]!;
  const below = previous[i + 1]?.first ?? null;
  const inSegment = and(gte(products.id, segment.first), below === null ? undefined : lt(products.id, below)) as SQL;
  const changedQuery = db
    .select({ id: products.id })
    .from(products)
    .where(and(inSegment, gt(products.changedVersion, state.base)));
  if (!segment.parts) {
    // Built before parts: re-encoded whole.
    const items = await readRange(deps, { first: segment.first, below }, names);
    return Promise.all(
      segmentGroups(deps.limits, encodeParts(deps, segment.first, items)).map((group, g) =>
        writeSegment(deps, state.id, `${i}-${g}`, g === 0 ? segment.first : group[0]!.part.first, group),
      ),
    );
  }
  const [changed, stored] = await Promise.all([changedQuery, readSegment(deps.bucket, segment)]);
  const { parts } = stored;
  const dirty = new Set(changed.map(({ id }) => segmentIndexOf(parts, id)));
  if (dirty.size === 0) return [segment];
  const rangeOf = (j: number): Range => ({ first: j === 0 ? segment.first : parts[j]!.first, below: parts[j + 1]?.first ?? below });
  const dirtyParts = [...dirty].sort((a, b) => a - b);
  const fresh = new Map<number, Encoded[]>(dirtyParts.map((j) => [j, []]));
  for (const item of await readRanges(deps, dirtyParts.map(rangeOf), names)) fresh.get(segmentIndexOf(parts, item.id))!.push(item);
  const pieces: Piece[] = [];
  const offsets = { json: 0, ndjson: 0 };
  for (const [j, part] of parts.entries()) {
    if (j > 0) offsets.json += JSON_SEPARATOR.bytes.length;
    const start = { ...offsets };
    offsets.json += part.json.bytes;
    offsets.ndjson += part.ndjson.bytes;
    const items = fresh.get(j);
    if (items) pieces.push(...encodeParts(deps, rangeOf(j).first, items));
    else
      pieces.push({
        part,
        json: stored.json.subarray(start.json, offsets.json),
        ndjson: stored.ndjson.subarray(start.ndjson, offsets.ndjson),
      });
  }
  if (offsets.json !== stored.json.length || offsets.ndjson !== stored.ndjson.length)
    throw new Error(`The catalogue segment ${segment.json.key} does not match its part index`);
  const groups = segmentGroups(deps.limits, pieces);
  return Promise.all(
    groups.map((group, g) =>
      writeSegment(deps, state.id, groups.length === 1 ? `${i}` : `${i}-${g}`, g === 0 ? segment.first : group[0]!.part.first, group),
    ),
  );
}

// ---- The steps ------------------------------------------------------------------------------------------

/**
 * The first step: nothing when the snapshot holds the catalogue version; otherwise a new build, full
 * for the first snapshot or after a reset (`reset_version`, moved by the seed and by a competitor's
 * rename), else incremental from the snapshot the pointer names.
 */
async function plan(deps: BuildDeps, now: number): Promise<BuildState | { current: Pointer | null; version: number }> {
  const { db, bucket } = deps;
  const [state] = await db.select().from(catalogueState).where(eq(catalogueState.id, 1));
  const version = state?.version ?? 0;
  const pointer = await readPointer(bucket);
  if (pointer && pointer.version >= version) return { current: pointer, version };
  const legacy = pointer ? null : await readPointer(bucket, LEGACY_POINTER_KEY);
  const previous = pointer ? await cachedManifest(bucket, pointer.manifest) : null;
  const full = !previous || previous.segments.length === 0 || (state?.resetVersion ?? 0) > previous.version;
  return {
    id: `${version}-${now.toString(36)}-${crypto.randomUUID().slice(0, 8)}`,
    version,
    startedAt: now,
    full,
    previous: (pointer ?? legacy)?.manifest ?? null,
    legacy: legacy !== null,
    base: previous?.version ?? 0,
    phase: full ? "segments" : "scan",
    scanAfter: { changedVersion: previous?.version ?? 0, id: "\uffff" },
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
    // Once every segment holds a change, the rest of the scan would tell nothing more.
    if (rows.length < deps.limits.segmentTarget || dirty.size === previous.segments.length) {
      Object.assign(state, { phase: dirty.size > 0 ? "segments" : "finish", dirty: [...dirty].sort((a, b) => a - b) });
      return;
    }
  }
  state.dirty = [...dirty].sort((a, b) => a - b);
}

/** Full build: the next segments of segmentTarget products, read in id order after the last one written. */
async function fullSegments(deps: BuildDeps, state: BuildState): Promise<Record<string, Segment[]>> {
  const names = await competitorNames(deps);
  const written: Record<string, Segment[]> = {};
  const { limits } = deps;
  for (let n = 0; n < limits.stepSegments && deps.work.productsEncoded < limits.stepProducts; n++) {
    const [rows, offerRows] = await deps.db.batch(
      pageQueries(deps.db, limits.segmentTarget, state.cursor ?? "", state.cursor === null, null),
    );
    if (rows.length > 0) {
      const first = state.position === 0 ? "" : rows[0]!.id;
      const segment = await writeSegment(
        deps,
        state.id,
        `${state.position}`,
        first,
        encodeParts(deps, first, encode(rows, offerRows, names)),
      );
      written[builtKey(state.position)] = [segment];
      state.position++;
      state.cursor = rows[rows.length - 1]!.id;
    }
    if (rows.length < limits.segmentTarget) {
      state.phase = "finish";
      break;
    }
  }
  return written;
}

/** Incremental build: the next dirty segments rewritten, within the step's budgets. */
async function incrementalSegments(deps: BuildDeps, state: BuildState): Promise<Record<string, Segment[]>> {
  const previous = await cachedManifest(deps.bucket, state.previous!);
  const names = await competitorNames(deps);
  const written: Record<string, Segment[]> = {};
  for (let n = 0; n < deps.limits.stepSegments && state.position < state.dirty.length; n++) {
    if (deps.work.productsEncoded >= deps.limits.stepProducts || deps.work.d1Statements + SEGMENT_D1_STATEMENTS > STEP_D1_STATEMENTS) break;
    const i = state.dirty[state.position]!;
    written[builtKey(i)] = await rewriteSegment(deps, state, previous.segments, i, names);
    state.position++;
  }
  if (state.position >= state.dirty.length) state.phase = "finish";
  return written;
}

function competitorViews(rows: readonly CompetitorRow[], segments: readonly Segment[]): CompetitorView[] {
  const counts = new Map<string, number>();
  for (const segment of segments) for (const [id, n] of Object.entries(segment.offers)) counts.set(id, (counts.get(id) ?? 0) + n);
  return rows.map((row) => ({ id: row.id, name: row.name, domain: row.domain, offer_count: counts.get(row.id) ?? 0 }));
}

/** Every object of a snapshot: its segments' (any layout's) and then its manifest, deleted in that order. */
export function snapshotObjects(manifest: {
  id: string;
  segments: readonly { json: { key: string }; ndjson: { key: string }; parts?: string }[];
}): string[] {
  const keys = manifest.segments.flatMap((segment) => [segment.json.key, segment.ndjson.key, ...(segment.parts ? [segment.parts] : [])]);
  return [...keys, manifestKey(manifest.id)];
}

/** The last step: the manifest, then the pointer; returns the manifest and the objects of the replaced snapshot it no longer uses. */
async function finish(deps: BuildDeps, state: BuildState, now: number): Promise<{ manifest: Manifest; released: string[] }> {
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
  };
  await bucket.put(manifestKey(state.id), JSON.stringify(manifest));
  await bucket.put(POINTER_KEY, JSON.stringify({ manifest: state.id, version: state.version } satisfies Pointer));
  manifestCache = manifest;
  let released: string[] = [];
  if (state.previous !== null) {
    // Any layout's manifest (the first layout's too); one gone already releases nothing more, as what it used is unknown.
    const object = await bucket.get(manifestKey(state.previous));
    const replaced = object ? ((await object.json()) as Parameters<typeof snapshotObjects>[0]) : null;
    const kept = new Set(snapshotObjects(manifest));
    released = replaced ? snapshotObjects(replaced).filter((key) => !kept.has(key)) : [manifestKey(state.previous)];
  }
  if (state.legacy) await bucket.delete(LEGACY_POINTER_KEY); // its snapshot is retired like any replaced one
  return { manifest, released };
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
    const planned = await plan(deps, now);
    if (!("id" in planned)) {
      return {
        status: "current",
        report: {
          built: false,
          manifest: planned.current?.manifest ?? null,
          version: planned.version,
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
    state = planned;
  }
  if (state.phase === "scan") await scan(deps, state);
  else if (state.phase === "segments") {
    const written = state.full ? await fullSegments(deps, state) : await incrementalSegments(deps, state);
    account(state, deps.work, Date.now() - now);
    await deps.storage.put({ ...written, [BUILD_KEY]: state });
    return { status: "building" };
  } else {
    const { manifest, released } = await finish(deps, state, now);
    account(state, deps.work, Date.now() - now);
    const report = reportOf(state, manifest, Date.now());
    await deps.storage.transaction(async (txn) => {
      await onReleased(txn, { build: state.id, keys: released, at: now });
      const keys = [...(await txn.list({ prefix: BUILT_PREFIX })).keys(), BUILD_KEY];
      for (let i = 0; i < keys.length; i += 128) await txn.delete(keys.slice(i, i + 128));
    });
    return { status: "built", report };
  }
  account(state, deps.work, Date.now() - now);
  await deps.storage.put(BUILD_KEY, state);
  return { status: "building" };
}
