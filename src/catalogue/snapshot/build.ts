import { and, asc, eq, gt, gte, inArray, lt, or, type SQL, sql } from "drizzle-orm";
import pLimit, { type LimitFunction } from "p-limit";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import type { Database } from "../../platform/db.ts";
import { catalogueState, competitors, offers, products } from "../../platform/tables.ts";
import type { CompetitorView } from "../schema.ts";
import { type CompetitorRow, type OfferRow, productView } from "../views.ts";
import { type BuildReport, type BuildWork, noBuildWork } from "./build-report.ts";
import { type Checked, concatenated, deflatePart } from "./gzip-member.ts";
import {
  bodyParts,
  type Extent,
  findManifest,
  JSON_SEPARATOR,
  MAX_SUMMARY_VALUES,
  type Manifest,
  manifestKey,
  type Part,
  PartIndex,
  POINTER_KEY,
  type Pointer,
  readManifest,
  readPointer,
  type Segment,
  type Summary,
  segmentIndexOf,
  stepKeys,
} from "./manifest.ts";

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
/**
 * Parts of 12 products: 1,000 changes scattered over 100,000 products touch about 940 parts (P·(1−e^(−k/P))),
 * 11 % of the products re-encoded (parts of 25: 22 %), for stored bodies about 10 % larger (docs/catalogue.md).
 */
export const BUILD_LIMITS: BuildLimits = { partTarget: 12, segmentTarget: 1000, stepProducts: 5000, stepSegments: 16 };
export const SEGMENT_TARGET = BUILD_LIMITS.segmentTarget;
export const SEGMENT_MAX = 2 * SEGMENT_TARGET;
/**
 * D1 statements a step makes at most (D1 allows 1,000 an invocation): an incremental step takes a segment
 * only while its changed parts' statements (two per RANGES_PER_STATEMENT parts) fit after its candidates'
 * changed ids (one each) and the competitors'; a scan step makes at most SCAN_PAGES and a full-build step
 * two a segment.
 */
export const STEP_D1_STATEMENTS = 150;
/**
 * R2 reads an incremental step makes at most (each is a subrequest: Workers Paid allows 10,000 a request,
 * 1,000 on older plans, so this stays well under both): a segment costs its part index and, when
 * compacted, two reads per kept run it copies.
 */
export const STEP_R2_READS = 600;
/** Pages of segmentTarget changed ids a scan step reads at most. */
const SCAN_PAGES = 100;

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

/**
 * A part of a segment being written: its index entry and, when it is to be written (just encoded, or
 * copied by a compaction), each form's compressed bytes; without bytes it stays where its entry says.
 */
type Piece = { part: Part; bytes?: undefined } | { part: UnplacedPart; bytes: { json: Uint8Array; ndjson: Uint8Array } };
/** A part's index entry before its bytes are placed in a step's objects. */
type UnplacedPart = Omit<Part, "json" | "ndjson"> & Record<"json" | "ndjson", Omit<Part["json"], "key" | "offset">>;

/**
 * Ranges a segment's form may take before it is compacted: a response reads each range alone (at
 * most 6 connections at once), so this bounds what fragmentation adds to a full list's reads.
 */
export const MAX_EXTENTS = 64;
/**
 * Range reads a full response may need, all segments' extents of one form together: each is an R2 read,
 * a subrequest (Workers Paid allows 10,000 a request), so a large catalogue gets fewer extents a segment.
 */
const RESPONSE_READS = 5000;
/** A segment form's ranges before it is compacted: MAX_EXTENTS, or fewer when RESPONSE_READS would not cover every segment's. */
const extentCap = (segments: number): number => Math.max(4, Math.min(MAX_EXTENTS, Math.floor(RESPONSE_READS / Math.max(1, segments))));
/** Ranges a compaction leaves a segment's form (see compacted): room for a few more changes before the next. */
export const compactTo = (cap: number): number => Math.floor((3 * cap) / 4);

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

/** Id ranges per statement when several are read at once: two bound parameters each, well under D1's 100. */
const RANGES_PER_STATEMENT = 24;

/**
 * Every product of several ranges (the changed parts of a step's segments), in one batch: per
 * RANGES_PER_STATEMENT ranges, one statement for the products and one for their offers. A part holds
 * a few dozen products, so no page limit is needed; reading only the changed parts is what keeps a
 * scattered change's D1 reads proportional to it.
 */
async function readRanges(deps: BuildDeps, ranges: readonly Range[], names: ReadonlyMap<string, CompetitorRow>): Promise<Encoded[]> {
  const { db } = deps;
  if (ranges.length === 0) return [];
  const queries = [];
  for (let i = 0; i < ranges.length; i += RANGES_PER_STATEMENT) {
    const inRanges = or(
      ...ranges
        .slice(i, i + RANGES_PER_STATEMENT)
        .map((range) => and(gte(products.id, range.first), range.below === null ? undefined : lt(products.id, range.below))),
    );
    // Both through `id IN (…)`: with ORDER BY id beside the OR of ranges, SQLite scans the whole table
    // in id order rather than seek each range (91 ms against 1 ms at 100,000 products).
    const ids = db.select({ id: products.id }).from(products).where(inRanges);
    queries.push(
      db.select().from(products).where(inArray(products.id, ids)).orderBy(asc(products.id)),
      db.select().from(offers).where(inArray(offers.productId, ids)).orderBy(asc(offers.productId), asc(offers.competitorId)),
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
    bytes: { json: json.bytes, ndjson: ndjson.bytes },
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

/**
 * The objects one step writes (stepKeys): each form's parts one after another (JSON with a stored ","
 * between each two, so parts placed one after another make one range) and the part indexes of the
 * segments it writes. Written once the step's segments are assembled, before its progress is recorded.
 */
class StepObjects {
  readonly #keys: ReturnType<typeof stepKeys>;
  readonly #chunks = { json: [] as Uint8Array[], ndjson: [] as Uint8Array[], parts: [] as Uint8Array[] };
  readonly #size = { json: 0, ndjson: 0, parts: 0 };

  constructor(buildId: string, step: number) {
    this.#keys = stepKeys(buildId, step);
  }

  #append(form: "json" | "ndjson" | "parts", bytes: Uint8Array): number {
    const offset = this.#size[form];
    this.#chunks[form].push(bytes);
    this.#size[form] += bytes.length;
    return offset;
  }

  /** The piece's bytes appended; returns its index entry (from `first`) with where they are. */
  place(piece: Piece, first = piece.part.first): Part {
    if (!piece.bytes) return { ...piece.part, first };
    const { part, bytes } = piece;
    if (this.#size.json > 0) this.#append("json", JSON_SEPARATOR.bytes);
    return {
      ...part,
      first,
      json: { ...part.json, key: this.#keys.json, offset: this.#append("json", bytes.json) },
      ndjson: { ...part.ndjson, key: this.#keys.ndjson, offset: this.#append("ndjson", bytes.ndjson) },
    };
  }

  /** A segment's part index appended; returns its range. */
  index(parts: readonly Part[]): Extent {
    const bytes = encoder.encode(JSON.stringify(parts));
    return { key: this.#keys.parts, offset: this.#append("parts", bytes), bytes: bytes.length };
  }

  async write({ bucket, work }: BuildDeps): Promise<void> {
    const forms = (["json", "ndjson", "parts"] as const).filter((form) => this.#size[form] > 0);
    await Promise.all(forms.map((form) => bucket.put(this.#keys[form], joined(this.#chunks[form]))));
    for (const form of forms) work.r2BytesWritten += this.#size[form];
  }
}
const encoder = new TextEncoder();

/** A form's ranges: runs of parts lying one after another in one object (JSON: a stored "," between each two). */
function extentsOfParts(parts: readonly Part[], form: "json" | "ndjson"): Extent[] {
  const gap = form === "json" ? JSON_SEPARATOR.bytes.length : 0;
  const extents: Extent[] = [];
  for (const part of parts) {
    const { key, offset, bytes } = part[form];
    const last = extents.at(-1);
    if (last && last.key === key && last.offset + last.bytes + gap === offset) last.bytes += gap + bytes;
    else extents.push({ key, offset, bytes });
  }
  return extents;
}

/** A run of pieces that take one range: new ones (placed one after another), or kept ones lying one after another. */
interface Run {
  start: number;
  end: number;
  kept: boolean;
}

/** The ranges a group of pieces would take as it is: new pieces placed one after another, kept ones where they are. */
function runsOf(pieces: readonly Piece[]): Run[] {
  const runs: Run[] = [];
  for (const [i, piece] of pieces.entries()) {
    const before = pieces[i - 1];
    const sameRun = before && (piece.bytes ? before.bytes !== undefined : !before.bytes && follows(before.part, piece.part));
    if (sameRun) runs[runs.length - 1]!.end = i + 1;
    else runs.push({ start: i, end: i + 1, kept: !piece.bytes });
  }
  return runs;
}
const follows = (a: Part, b: Part) => a.ndjson.key === b.ndjson.key && a.ndjson.offset + a.ndjson.bytes === b.ndjson.offset;

/** One segment starting at `first` from its pieces: new bytes placed in the step's objects, kept parts left where they are. */
function assembleSegment(deps: BuildDeps, objects: StepObjects, first: string, pieces: readonly Piece[]): Segment {
  const parts = pieces.map((piece, i) => objects.place(piece, i === 0 ? first : undefined));
  const form = (name: "json" | "ndjson", checked: Checked) => {
    const extents = extentsOfParts(parts, name);
    const between = name === "json" ? JSON_SEPARATOR.bytes.length * (extents.length - 1) : 0;
    return { extents, bytes: extents.reduce((sum, extent) => sum + extent.bytes, between), ...checked };
  };
  deps.work.segmentsWritten++;
  return {
    first,
    count: parts.reduce((sum, part) => sum + part.count, 0),
    json: form("json", concatenated(jsonPieces(parts.map((part) => part.json)))),
    ndjson: form("ndjson", concatenated(parts.map((part) => part.ndjson))),
    parts: objects.index(parts),
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

async function readBytes(bucket: R2Bucket, { key, offset, bytes }: Extent): Promise<Uint8Array> {
  const object = await bucket.get(key, { range: { offset, length: bytes } });
  if (!object) throw new Error(`The catalogue object ${key} is missing from R2`);
  return new Uint8Array(await object.arrayBuffer());
}

/** A previous segment's part index: each part with where its bytes are. */
async function readPartIndex(bucket: R2Bucket, segment: Segment): Promise<Part[]> {
  return PartIndex.parse(JSON.parse(decoder.decode(await readBytes(bucket, segment.parts))));
}
const decoder = new TextDecoder();

/**
 * Kept parts lying one after another, read back for a compaction: one range read per form, sliced
 * into each part's bytes (JSON parts have a stored "," between each two).
 */
async function readRun(bucket: R2Bucket, parts: readonly Part[]): Promise<NonNullable<Piece["bytes"]>[]> {
  const read = async (form: "json" | "ndjson") => {
    const first = parts[0]![form];
    const last = parts[parts.length - 1]![form];
    const bytes = await readBytes(bucket, { key: first.key, offset: first.offset, bytes: last.offset + last.bytes - first.offset });
    return parts.map((part) => bytes.subarray(part[form].offset - first.offset, part[form].offset - first.offset + part[form].bytes));
  };
  const [json, ndjson] = await Promise.all([read("json"), read("ndjson")]);
  return parts.map((_, k) => ({ json: json[k]!, ndjson: ndjson[k]! }));
}

/**
 * A group of pieces whose ranges would exceed `cap`, compacted: kept runs copied (read, and
 * written again among the new parts, which joins them to the new runs beside them) until it takes at
 * most compactTo(cap) ranges. The run copied next is the one with the fewest bytes per range it saves, so a
 * compaction copies the short runs between changed parts, not the whole segment; stopping well below
 * the cap leaves room for the next few changes before another.
 */
async function compacted(bucket: R2Bucket, group: readonly Piece[], cap: number, limit: LimitFunction): Promise<Piece[]> {
  let runs = runsOf(group);
  if (runs.length <= cap) return [...group];
  const pieces = [...group];
  const chosen: Run[] = [];
  while (runs.length > compactTo(cap)) {
    let best: { run: Run; cost: number } | undefined;
    for (const [r, run] of runs.entries()) {
      if (!run.kept) continue;
      const saved = Number(runs[r - 1]?.kept === false) + Number(runs[r + 1]?.kept === false);
      let bytes = 0;
      for (let k = run.start; k < run.end; k++) bytes += pieces[k]!.part.json.bytes;
      const cost = bytes / Math.max(saved, 0.5);
      if (!best || cost < best.cost) best = { run, cost };
    }
    if (!best) break;
    chosen.push(best.run);
    // Counted as new from now on, so the next choice sees the runs it joins; the bytes are read below.
    for (let k = best.run.start; k < best.run.end; k++) pieces[k] = { part: pieces[k]!.part, bytes: UNREAD };
    runs = runsOf(pieces);
  }
  await Promise.all(
    chosen.map(async ({ start, end }) => {
      const parts = group.slice(start, end).flatMap((piece) => (piece.bytes ? [] : [piece.part]));
      const bytes = await limit(() => readRun(bucket, parts));
      for (const [k, part] of parts.entries()) pieces[start + k] = { part, bytes: bytes[k]! };
    }),
  );
  return pieces;
}
const UNREAD = { json: new Uint8Array(0), ndjson: new Uint8Array(0) };

/** A previous segment an incremental step rewrites: its part index, and which parts hold a product changed after `base`. */
interface SegmentChanges {
  /** Its index in the previous manifest. */
  i: number;
  parts: Part[];
  /** Indexes into `parts`, ascending. */
  dirty: number[];
}

const segmentRange = (segments: readonly Segment[], i: number): Range => ({
  first: segments[i]!.first,
  below: segments[i + 1]?.first ?? null,
});

/** Part `j` of a segment as an id range: the first part from the segment's own first id, the last up to the next segment. */
function partRange(segment: Range, parts: readonly Part[], j: number): Range {
  return { first: j === 0 ? segment.first : parts[j]!.first, below: parts[j + 1]?.first ?? segment.below };
}

/**
 * Where the changes in previous segments `indexes` are: one D1 batch of each segment's ids changed after
 * `base` (a keyed range read), beside the segments' part indexes read from R2.
 */
async function findChanges(
  deps: BuildDeps,
  base: number,
  segments: readonly Segment[],
  indexes: readonly number[],
): Promise<SegmentChanges[]> {
  const { db, bucket } = deps;
  const queries = indexes.map((i) => {
    const { first, below } = segmentRange(segments, i);
    return db
      .select({ id: products.id })
      .from(products)
      .where(and(gte(products.id, first), below === null ? undefined : lt(products.id, below), gt(products.changedVersion, base)));
  });
  const [changed, indexesRead] = await Promise.all([
    db.batch(queries as unknown as Parameters<typeof db.batch>[0]) as unknown as Promise<{ id: string }[][]>,
    pLimit(MAX_OPEN_CONNECTIONS).map(indexes, (i) => readPartIndex(bucket, segments[i]!)),
  ]);
  return indexes.map((i, k) => {
    const parts = indexesRead[k]!;
    const dirty = new Set(changed[k]!.map(({ id }) => segmentIndexOf(parts, id)));
    return { i, parts, dirty: [...dirty].sort((a, b) => a - b) };
  });
}

/**
 * The segments replacing `changes`' (in order): their changed parts' products read in one D1 batch and
 * re-encoded, the other parts kept where they are, and a group that would take over extentCap ranges
 * compacted. Usually one segment each; none for a segment that holds no product any more; several
 * for one grown past twice segmentTarget.
 */
async function rewriteSegments(
  deps: BuildDeps,
  objects: StepObjects,
  segments: readonly Segment[],
  changes: readonly SegmentChanges[],
  names: ReadonlyMap<string, CompetitorRow>,
): Promise<Segment[][]> {
  const ranges = changes.flatMap(({ i, parts, dirty }) => dirty.map((j) => partRange(segmentRange(segments, i), parts, j)));
  const fresh = new Map<string, Encoded[]>(ranges.map((range) => [range.first, []]));
  const owner = new Map(changes.map((change) => [change.i, change]));
  for (const item of await readRanges(deps, ranges, names)) {
    const change = owner.get(segmentIndexOf(segments, item.id))!;
    fresh.get(partRange(segmentRange(segments, change.i), change.parts, segmentIndexOf(change.parts, item.id)).first)!.push(item);
  }
  const limit = pLimit(MAX_OPEN_CONNECTIONS);
  const cap = extentCap(segments.length);
  const grouped = await Promise.all(
    changes.map(({ i, parts }) => {
      const range = segmentRange(segments, i);
      const pieces = parts.flatMap((part, j): Piece[] => {
        const first = partRange(range, parts, j).first;
        const items = fresh.get(first);
        return items ? encodeParts(deps, first, items) : [{ part }];
      });
      return Promise.all(segmentGroups(deps.limits, pieces).map((group) => compacted(deps.bucket, group, cap, limit)));
    }),
  );
  return grouped.map((groups, k) =>
    groups.map((group, g) => assembleSegment(deps, objects, g === 0 ? segments[changes[k]!.i]!.first : group[0]!.part.first, group)),
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
  const previous = pointer ? await cachedManifest(bucket, pointer.manifest) : null;
  const full = !previous || previous.segments.length === 0 || (state?.resetVersion ?? 0) > previous.version;
  return {
    id: `${version}-${now.toString(36)}-${crypto.randomUUID().slice(0, 8)}`,
    version,
    startedAt: now,
    full,
    previous: pointer?.manifest ?? null,
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
async function fullSegments(deps: BuildDeps, objects: StepObjects, state: BuildState): Promise<Record<string, Segment[]>> {
  const names = await competitorNames(deps);
  const written: Record<string, Segment[]> = {};
  const { limits } = deps;
  for (let n = 0; n < limits.stepSegments && deps.work.productsEncoded < limits.stepProducts; n++) {
    const [rows, offerRows] = await deps.db.batch(
      pageQueries(deps.db, limits.segmentTarget, state.cursor ?? "", state.cursor === null, null),
    );
    if (rows.length > 0) {
      const first = state.position === 0 ? "" : rows[0]!.id;
      const segment = assembleSegment(deps, objects, first, encodeParts(deps, first, encode(rows, offerRows, names)));
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

/**
 * Incremental build: the next dirty segments rewritten, within the step's budgets. The next
 * stepSegments are looked at (their changed ids and part indexes); of those, the step takes as many
 * as fit its D1 statements, R2 reads (a compaction's copies) and stepProducts, all known once the part
 * indexes say which parts changed. At least one is taken, so a build always moves.
 */
async function incrementalSegments(deps: BuildDeps, objects: StepObjects, state: BuildState): Promise<Record<string, Segment[]>> {
  const { segments } = await cachedManifest(deps.bucket, state.previous!);
  const candidates = state.dirty.slice(state.position, state.position + deps.limits.stepSegments);
  const [names, changes] = await Promise.all([competitorNames(deps), findChanges(deps, state.base, segments, candidates)]);
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
  if (state.position >= state.dirty.length) state.phase = "finish";
  return written;
}

function competitorViews(rows: readonly CompetitorRow[], segments: readonly Segment[]): CompetitorView[] {
  const counts = new Map<string, number>();
  for (const segment of segments) for (const [id, n] of Object.entries(segment.offers)) counts.set(id, (counts.get(id) ?? 0) + n);
  return rows.map((row) => ({ id: row.id, name: row.name, domain: row.domain, offer_count: counts.get(row.id) ?? 0 }));
}

/** Every object of a snapshot: its segments' (any layout's, each once) and then its manifest, deleted in that order. */
export function snapshotObjects(manifest: Pick<Manifest, "id" | "segments">): string[] {
  const keys = new Set<string>();
  for (const segment of manifest.segments) {
    for (const extent of [...segment.json.extents, ...segment.ndjson.extents]) keys.add(extent.key);
    keys.add(segment.parts.key);
  }
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
    // A replaced manifest already gone releases nothing more: what it used is unknown.
    const replaced = await findManifest(bucket, state.previous);
    const kept = new Set(snapshotObjects(manifest));
    released = replaced ? snapshotObjects(replaced).filter((key) => !kept.has(key)) : [manifestKey(state.previous)];
  }
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
    const objects = new StepObjects(state.id, state.steps);
    const written = state.full ? await fullSegments(deps, objects, state) : await incrementalSegments(deps, objects, state);
    await objects.write(deps);
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
