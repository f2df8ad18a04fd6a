import type { BuildWork } from "./build-report.ts";
import { type SegmentValues, segmentValues, valuesKey } from "./directory.ts";
import { type Piece, valueSet } from "./encode.ts";
import { type Checked, concatenated } from "./gzip-member.ts";
import type { BuildDeps, BuildLimits } from "./limits.ts";
import {
  type Extent,
  JSON_SEPARATOR,
  mergedExtents,
  type NdjsonRead,
  type Part,
  partCompetitors,
  partIndexKey,
  type ReadPart,
  type Segment,
  type Summary,
  stepKeys,
} from "./manifest.ts";
import { ListPieces, type ListStep } from "./value-lists.ts";

/**
 * Segments put together from parts: new parts' bytes placed in the step's objects (StepObjects), kept
 * parts left where they are, the segment's checksums combined from its parts' and its summaries merged.
 */

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

/** A part as filtered reads see it: where its NDJSON bytes are and what it holds (src/catalogue/snapshot/directory.ts). */
const readPart = (part: Part): ReadPart => ({
  first: part.first,
  count: part.count,
  ndjson: { key: part.ndjson.key, offset: part.ndjson.offset, bytes: part.ndjson.bytes },
  maxUpdatedAt: part.maxUpdatedAt,
  brands: part.brands,
  categories: part.categories,
  competitors: partCompetitors(part),
  skus: part.skus,
  rows: part.rows,
});

const encoder = new TextEncoder();

/**
 * What one step writes: to R2, each form's parts one after another (stepKeys; JSON with a stored ","
 * between each two, so parts placed one after another make one range) and the segments' part indexes as
 * filtered reads use them (the `index` object); to the builder's storage, the part indexes of the segments it
 * writes and their filter directory values (partIndexes, put with the step's progress). The objects are
 * written once the step's segments are assembled, before its progress is recorded.
 */
export class StepObjects {
  readonly #keys: ReturnType<typeof stepKeys>;
  readonly #chunks = { json: [] as Uint8Array[], ndjson: [] as Uint8Array[], index: [] as Uint8Array[] };
  readonly #size = { json: 0, ndjson: 0, index: 0 };
  #indexed = 0;
  /** The part indexes of the segments assembled, by key (partIndexKey), and their values (valuesKey): for the step's storage write. */
  readonly partIndexes: Record<string, Part[] | SegmentValues> = {};
  /** The products encoded, for the per-value lists (src/catalogue/snapshot/value-lists.ts). */
  readonly lists = new ListPieces();

  constructor(
    private readonly buildId: string,
    private readonly step: number,
  ) {
    this.#keys = stepKeys(buildId, step);
  }

  #append(form: "json" | "ndjson" | "index", bytes: Uint8Array): number {
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

  /**
   * A segment's part index, kept for the step's storage write with its directory values, and appended to the step's
   * `index` object for readers; returns its storage key and where readers find it.
   */
  index(parts: Part[], work: BuildWork): { parts: string; index: Extent } {
    const key = partIndexKey(this.buildId, this.step, this.#indexed++);
    this.partIndexes[key] = parts;
    this.partIndexes[valuesKey(key)] = segmentValues(parts);
    work.partIndexesWritten++;
    const bytes = encoder.encode(JSON.stringify(parts.map(readPart)));
    return { parts: key, index: { key: this.#keys.index, offset: this.#append("index", bytes), bytes: bytes.length } };
  }

  /** Writes the step's objects; returns the lists' new pieces, for the step's storage write. */
  async write({ bucket, work }: BuildDeps): Promise<ListStep> {
    const lists = this.lists.encode(this.#keys.lists);
    const listBytes = joined(lists.bytes);
    const forms = (["json", "ndjson", "index"] as const).filter((form) => this.#size[form] > 0);
    await Promise.all([
      ...forms.map((form) => bucket.put(this.#keys[form], joined(this.#chunks[form]))),
      ...(listBytes.length > 0 ? [bucket.put(this.#keys.lists, listBytes)] : []),
    ]);
    for (const form of forms) work.r2BytesWritten += this.#size[form];
    work.r2BytesWritten += listBytes.length;
    work.listBytesWritten += listBytes.length;
    return lists;
  }
}

/** A form's ranges: runs of parts lying one after another in one object (JSON: a stored "," between each two). */
const extentsOfParts = (parts: readonly Part[], form: "json" | "ndjson"): Extent[] =>
  mergedExtents(
    parts.map((part) => part[form]),
    form,
  );

/**
 * Products a product read inflates, about: a part is 12 to 24, a segment ~1,000 (~1.4 MB of JSON, ~10 ms of CPU to
 * inflate and split, where a range of this many is ~0.2 MB).
 */
const READ_RANGE_PRODUCTS = 128;

/**
 * The NDJSON form's ranges for product reads: a new one wherever a part does not follow the last (a new extent, as
 * extentsOfParts makes them) or the open one holds READ_RANGE_PRODUCTS products.
 */
function ndjsonReads(parts: readonly Part[]): NdjsonRead[] {
  const reads: NdjsonRead[] = [];
  let extent = -1;
  let products = 0;
  let end: { key: string; offset: number } | undefined;
  for (const { first, count, ndjson } of parts) {
    const follows = end?.key === ndjson.key && end.offset === ndjson.offset;
    if (!follows) extent++;
    const open = reads.at(-1);
    if (follows && open && products < READ_RANGE_PRODUCTS) {
      open[3] += ndjson.bytes;
      products += count;
    } else {
      reads.push([first, extent, ndjson.offset, ndjson.bytes]);
      products = count;
    }
    end = { key: ndjson.key, offset: ndjson.offset + ndjson.bytes };
  }
  return reads;
}

/** One segment starting at `first` from its pieces: new bytes placed in the step's objects, kept parts left where they are. */
export function assembleSegment(deps: BuildDeps, objects: StepObjects, first: string, pieces: readonly Piece[]): Segment {
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
    ndjsonReads: ndjsonReads(parts),
    ...objects.index(parts, deps.work),
    ...mergedSummary(parts),
  };
}

/** Pieces grouped into segments: one, or (over twice segmentTarget products) groups of about segmentTarget. */
export function segmentGroups({ segmentTarget }: BuildLimits, pieces: readonly Piece[]): Piece[][] {
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
