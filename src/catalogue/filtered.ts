import { isolateMap } from "../platform/isolate-memory.ts";
import type { ProductFilters } from "./schema.ts";
import { Directory, filterMayHold } from "./snapshot/directory.ts";
import { type Extent, type Manifest, mergedExtents, ReadPart, type Segment } from "./snapshot/manifest.ts";
import { extentLines } from "./snapshot/read.ts";
import { isCompact, listKey, listLines, type ValueList } from "./snapshot/value-lists.ts";
import type { OfferRow, ProductRow } from "./views.ts";

/**
 * Filtered reads of GET /products and the MCP catalogue tools (docs/catalogue.md, "Filtered reads"): from the
 * snapshot alone, no D1 statement, at a cost that follows the result. The body is exactly the snapshot's products
 * that match, in id order, so its ETag (the snapshot's id and the filter set) holds.
 *
 * A filter on one brand or one category alone reads that value's list (src/catalogue/snapshot/value-lists.ts): its
 * products kept together, a few ranges, where their parts lie scattered by random id. Any other filter set:
 *
 * 1. The snapshot's filter directory (src/catalogue/snapshot/directory.ts, kept by the isolate per snapshot) and the
 *    manifest's summaries name the segments that may hold a match: exactly for brand and category (a value no
 *    segment holds is answered from memory), by each segment's offers for a competitor, its newest update for
 *    updated_since and a Bloom filter for a SKU.
 * 2. Those segments' part indexes (a few hundred bytes a part, kept by the isolate) name the parts that may hold
 *    one: a part's summaries are exact.
 * 3. Only those parts are read, as byte ranges of NDJSON (parts lying one after another are one range), and their
 *    products tested line by line. Past MAX_PART_READS ranges a response (a batch its segments' share), the ranges
 *    closest to each other are read as one, so a broad filter costs a bounded number of R2 reads, as a scan does.
 */

/** The filters as they are compared: brand and category lowercased (as JavaScript does), updated_since in ms. */
export interface FilterSet {
  sku?: string;
  competitor?: string;
  brand?: string;
  category?: string;
  since?: number;
}

export function filterSet(filters: ProductFilters): FilterSet {
  return {
    ...(filters.sku !== undefined && { sku: filters.sku }),
    ...(filters.competitor !== undefined && { competitor: filters.competitor }),
    ...(filters.brand !== undefined && { brand: filters.brand.toLowerCase() }),
    ...(filters.category !== undefined && { category: filters.category.toLowerCase() }),
    ...(filters.updated_since !== undefined && { since: Date.parse(filters.updated_since) }),
  };
}

// ---- Matching --------------------------------------------------------------------------------------

const STRING = /"(?:[^"\\]|\\.)*"/y;

/**
 * A top-level field of a product's JSON text without parsing the whole: its key's first occurrence is
 * the field itself, as the keys before it hold strings (whose quotes are escaped) and offers come later.
 */
function fieldOf(line: string, key: string): string | null {
  const start = line.indexOf(`"${key}":`) + key.length + 3;
  if (line.startsWith("null", start)) return null;
  STRING.lastIndex = start;
  const literal = STRING.exec(line)?.[0] ?? '""';
  return literal.includes("\\") ? (JSON.parse(literal) as string) : literal.slice(1, -1);
}

/** Whether a product (its JSON text from the snapshot) passes the filters. */
function lineMatcher(f: FilterSet): (line: string) => boolean {
  const offerKey = f.competitor === undefined ? undefined : `"competitor_id":${JSON.stringify(f.competitor)},`;
  return (line) =>
    (offerKey === undefined || line.includes(offerKey)) &&
    (f.sku === undefined || fieldOf(line, "sku") === f.sku) &&
    (f.brand === undefined || fieldOf(line, "brand")?.toLowerCase() === f.brand) &&
    (f.category === undefined || fieldOf(line, "category")?.toLowerCase() === f.category) &&
    (f.since === undefined || Date.parse(fieldOf(line, "updated_at")!) >= f.since);
}

/** Whether a product (its D1 row and offers) passes the filters: the same rules as lineMatcher. */
export function rowMatcher(f: FilterSet): (row: ProductRow, offerRows: readonly OfferRow[]) => boolean {
  return (row, offerRows) =>
    (f.competitor === undefined || offerRows.some((offer) => offer.competitorId === f.competitor)) &&
    (f.sku === undefined || row.sku === f.sku) &&
    (f.brand === undefined || row.brand?.toLowerCase() === f.brand) &&
    (f.category === undefined || row.category?.toLowerCase() === f.category) &&
    (f.since === undefined || Date.parse(row.updatedAt) >= f.since);
}

/** Whether a segment may hold a match, by the manifest's summaries and the directory's SKU filter. */
function segmentMayMatch(f: FilterSet, directory: Directory): (segment: Segment, i: number) => boolean {
  return (segment, i) =>
    (f.competitor === undefined || (segment.offers[f.competitor] ?? 0) > 0) &&
    (f.since === undefined || Date.parse(segment.maxUpdatedAt) >= f.since) &&
    (f.sku === undefined || filterMayHold(directory.skus[i]!, f.sku));
}

/** Whether a part holds a match: a product whose row (FilterRow) passes every filter. Exact, so no part is read for nothing. */
function partMayMatch(f: FilterSet): (part: ReadPart) => boolean {
  return (part) => {
    const brand = f.brand === undefined ? undefined : (part.brands ?? []).indexOf(f.brand);
    const category = f.category === undefined ? undefined : (part.categories ?? []).indexOf(f.category);
    const competitor = f.competitor === undefined ? undefined : part.competitors.indexOf(f.competitor);
    if (brand === -1 || category === -1 || competitor === -1) return false;
    return part.rows.some(
      (row, k) =>
        (brand === undefined || row[0] === brand) &&
        (category === undefined || row[1] === category) &&
        (f.since === undefined || row[2]! >= f.since) &&
        (competitor === undefined || row.indexOf(competitor, 3) >= 3) &&
        (f.sku === undefined || part.skus[k] === f.sku),
    );
  };
}

// ---- What the isolate keeps ---------------------------------------------------------------------------

/**
 * Directories of the snapshots read lately (a snapshot's is immutable): the current and the one before. Values, not
 * promises: a request never waits on another's read (src/catalogue/snapshot/read.ts).
 */
const directories = isolateMap<string, Directory>();
const DIRECTORIES_KEPT = 2;

async function directoryOf(bucket: R2Bucket, manifest: Manifest): Promise<Directory> {
  const kept = directories.get(manifest.id);
  if (kept) return kept;
  const object = await bucket.get(manifest.directory);
  if (!object) throw new Error(`The catalogue directory ${manifest.directory} is missing from R2`);
  const directory = Directory.parse(await object.json());
  directories.set(manifest.id, directory);
  for (const id of directories.keys()) if (directories.size > DIRECTORIES_KEPT && id !== manifest.id) directories.delete(id);
  return directory;
}

/**
 * Segments' part indexes read lately, by where they are (an index extent is immutable and kept by the builds that
 * do not rewrite its segment, so a new snapshot keeps most of them), oldest use first; at most KEPT_PARTS parts.
 */
const partIndexes = isolateMap<string, ReadPart[]>();
/** The index of about 120,000 products: a bound on this cache's share of the isolate's 128 MB. */
const KEPT_PARTS = 10_000;
let keptParts = 0;
const extentName = ({ key, offset, bytes }: Extent) => `${key}@${offset}+${bytes}`;

function keepIndex(name: string, parts: ReadPart[]): void {
  partIndexes.set(name, parts);
  keptParts += parts.length;
  for (const [oldest, its] of partIndexes) {
    if (keptParts <= KEPT_PARTS || oldest === name) break;
    partIndexes.delete(oldest);
    keptParts -= its.length;
  }
}

/** Forgets every kept part index: the next read of each is a cold one (the tests measure that path). */
export function forgetKeptPartIndexes(): void {
  partIndexes.clear();
  keptParts = 0;
}

const IndexParts = ReadPart.array();

/** The part indexes of the segments, in their order: kept ones from memory, the others read, runs of neighbours as one range. */
async function readPartIndexes(bucket: R2Bucket, segments: readonly Segment[]): Promise<ReadPart[][]> {
  const missing = segments.filter((segment) => !partIndexes.has(extentName(segment.index)));
  const runs: Extent[][] = [];
  for (const segment of missing) {
    const run = runs.at(-1);
    const last = run?.at(-1);
    if (run && last!.key === segment.index.key && last!.offset + last!.bytes === segment.index.offset) run.push(segment.index);
    else runs.push([segment.index]);
  }
  const decoder = new TextDecoder();
  await Promise.all(
    runs.map(async (run) => {
      const first = run[0]!;
      const length = run.reduce((sum, extent) => sum + extent.bytes, 0);
      const object = await bucket.get(first.key, { range: { offset: first.offset, length } });
      if (!object) throw new Error(`The catalogue index ${first.key} is missing from R2`);
      const bytes = new Uint8Array(await object.arrayBuffer());
      for (const extent of run) {
        const at = extent.offset - first.offset;
        keepIndex(extentName(extent), IndexParts.parse(JSON.parse(decoder.decode(bytes.subarray(at, at + extent.bytes)))));
      }
    }),
  );
  return segments.map((segment) => {
    const name = extentName(segment.index);
    const parts = partIndexes.get(name)!;
    partIndexes.delete(name);
    partIndexes.set(name, parts); // the newest use
    return parts;
  });
}

// ---- Reading ------------------------------------------------------------------------------------

/**
 * Segments whose part indexes are read at once (and whose parts' reads are planned together): one, then twice as
 * many each batch up to MAX_BATCH, so a reader that stops early (search_products' first `limit`) reads little.
 */
const MAX_BATCH = 64;
/**
 * R2 reads of products a response makes at most, half the 10,000 subrequests an invocation gets: each batch may make
 * its segments' share of them, and never fewer than PART_READS_PER_SEGMENT a segment.
 */
const MAX_PART_READS = 5000;
const PART_READS_PER_SEGMENT = 4;

/** A range to read: parts `from` to `to` (inclusive) of a batch's parts in id order, lying one after another in one object. */
interface Run {
  from: number;
  to: number;
  extent: Extent;
}

const follows = (before: Extent, after: Extent) => before.key === after.key && before.offset + before.bytes === after.offset;

/**
 * The ranges that read every wanted part (indexes into `parts`, ascending): a part beside the last one read, in id
 * order and in its object, joins its range. Past `budget` ranges, the gaps of fewest bytes between ranges that can
 * be joined (the parts between lie one after another) are read too, joining them.
 */
export function readPlan(parts: readonly ReadPart[], wanted: readonly number[], budget: number): Extent[] {
  const runs: Run[] = [];
  for (const i of wanted) {
    const last = runs.at(-1);
    if (last && last.to === i - 1 && follows(last.extent, parts[i]!.ndjson)) {
      last.to = i;
      last.extent = { ...last.extent, bytes: last.extent.bytes + parts[i]!.ndjson.bytes };
    } else runs.push({ from: i, to: i, extent: { ...parts[i]!.ndjson } });
  }
  if (runs.length > budget) {
    // The gap after each run: its bytes, when every part from the run's last to the next run's first follows the one before.
    const gaps: { after: number; bytes: number }[] = [];
    for (let k = 0; k + 1 < runs.length; k++) {
      let joinable = true;
      for (let i = runs[k]!.to; i < runs[k + 1]!.from && joinable; i++) joinable = follows(parts[i]!.ndjson, parts[i + 1]!.ndjson);
      if (joinable) gaps.push({ after: k, bytes: runs[k + 1]!.extent.offset - (runs[k]!.extent.offset + runs[k]!.extent.bytes) });
    }
    const joined = new Set(
      gaps
        .sort((a, b) => a.bytes - b.bytes)
        .slice(0, runs.length - budget)
        .map((gap) => gap.after),
    );
    const merged: Run[] = [];
    for (const [k, run] of runs.entries()) {
      const last = merged.at(-1);
      if (last && joined.has(k - 1)) {
        last.to = run.to;
        last.extent = { ...last.extent, bytes: run.extent.offset + run.extent.bytes - last.extent.offset };
      } else merged.push({ ...run });
    }
    return merged.map((run) => run.extent);
  }
  return runs.map((run) => run.extent);
}

/** The segments (indexes into the manifest's) that may hold a match, ascending. */
async function candidateSegments(bucket: R2Bucket, manifest: Manifest, f: FilterSet): Promise<number[]> {
  if (manifest.segments.length === 0) return [];
  const directory = await directoryOf(bucket, manifest);
  const lists = [
    f.brand === undefined ? undefined : (directory.brands[f.brand] ?? []),
    f.category === undefined ? undefined : (directory.categories[f.category] ?? []),
  ].filter((list) => list !== undefined);
  let indexes = lists.length === 0 ? manifest.segments.map((_, i) => i) : lists.sort((a, b) => a.length - b.length)[0]!;
  for (const other of lists.slice(1)) {
    const set = new Set(other);
    indexes = indexes.filter((i) => set.has(i));
  }
  const mayMatch = segmentMayMatch(f, directory);
  return indexes.filter((i) => mayMatch(manifest.segments[i]!, i));
}

/**
 * The list of the one brand or category a filter names with nothing else (null: no product has it), when the snapshot
 * holds it compact: then the filter reads a few ranges of products that all match, where its parts are scattered by
 * id. Other filters narrow a list to fewer products than it holds (reads would not follow the result), so they go
 * through the parts. Undefined: the parts.
 */
async function valueList(bucket: R2Bucket, manifest: Manifest, f: FilterSet): Promise<ValueList | null | undefined> {
  const names = Object.keys(f);
  if (names.length !== 1 || (f.brand === undefined && f.category === undefined) || manifest.segments.length === 0) return undefined;
  const { lists } = await directoryOf(bucket, manifest);
  const list = lists[f.brand === undefined ? listKey("category", f.category!) : listKey("brand", f.brand)];
  if (!list) return null;
  return isCompact(list) ? list : undefined;
}

/**
 * The snapshot's products that match, in id order, a batch of segments at a time, as described at the top of this
 * file. Reads R2 only: the directory and part indexes (kept by the isolate) and the parts that may hold a match.
 */
export async function* matchingProducts(bucket: R2Bucket, manifest: Manifest, f: FilterSet): AsyncGenerator<string[]> {
  // No filter (a converted whole list): every product, so the segments' ranges as they are, no index read.
  if (Object.keys(f).length === 0)
    return yield* extentLines(
      bucket,
      mergedExtents(
        manifest.segments.flatMap((segment) => segment.ndjson.extents),
        "ndjson",
      ),
    );
  const listed = await valueList(bucket, manifest, f);
  if (listed === null) return; // no product has the value
  if (listed !== undefined) {
    const matches = lineMatcher(f);
    for await (const lines of listLines(bucket, listed)) {
      const hits = lines.filter(matches);
      if (hits.length > 0) yield hits;
    }
    return;
  }
  const segments = await candidateSegments(bucket, manifest, f);
  const matchesPart = partMayMatch(f);
  const matches = lineMatcher(f);
  for (let start = 0, size = 1; start < segments.length; start += size, size = Math.min(2 * size, MAX_BATCH)) {
    const batch = segments.slice(start, start + size).map((i) => manifest.segments[i]!);
    const parts = (await readPartIndexes(bucket, batch)).flat();
    const wanted = parts.flatMap((part, i) => (matchesPart(part) ? [i] : []));
    if (wanted.length === 0) continue;
    const budget = Math.max(PART_READS_PER_SEGMENT * batch.length, Math.floor((MAX_PART_READS * batch.length) / segments.length));
    for await (const lines of extentLines(bucket, readPlan(parts, wanted, budget))) {
      const hits = lines.filter(matches);
      if (hits.length > 0) yield hits;
    }
  }
}
