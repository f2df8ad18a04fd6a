import { z } from "zod";
import { Competitor, type CompetitorView } from "../schema.ts";
import type { CompetitorRow } from "../views.ts";
import { type Checked, type Deflated, storedPart } from "./gzip-member.ts";

/**
 * The catalogue snapshot's layout in R2 (binding CATALOGUE), described in docs/catalogue.md:
 * immutable segment objects and manifests, and one small mutable pointer naming the current manifest.
 */

/**
 * Names the current manifest. Segments are raw deflate parts of one gzip member (docs/catalogue.md).
 * v3: part indexes live in the builder's storage, not in R2, so a state holding a v2 snapshot (a
 * local one: no deployment held one) builds afresh rather than read a layout it cannot. v4: parts list
 * their SKUs and each snapshot has a filter directory (src/catalogue/snapshot/directory.ts), which a v3
 * snapshot lacks: it is built afresh once. v5: per-value lists (src/catalogue/snapshot/value-lists.ts), which a v4
 * snapshot lacks and an incremental build cannot start. v6: each product's summary carries lowest_offer, which a v5
 * snapshot's products lack (every body and ETag changes): built afresh once.
 */
export const POINTER_KEY = "catalogue/current.v6.json";
export const manifestKey = (id: string) => `catalogue/manifests/${id}.json`;
/** The objects one build step writes: each form's new parts one after another. */
export const stepKeys = (buildId: string, step: number) => ({
  json: `catalogue/segments/${buildId}/${step}.json.deflate`,
  ndjson: `catalogue/segments/${buildId}/${step}.ndjson.deflate`,
  /** The segments' part indexes as readers use them (ReadPart), one JSON array per segment, one after another. */
  index: `catalogue/segments/${buildId}/${step}.index.json`,
  /** Per-value lists (src/catalogue/snapshot/value-lists.ts): a segments step's new pieces, or a lists step's compacted lists. */
  lists: `catalogue/lists/${buildId}/${step}.ndjson.deflate`,
});
/** A snapshot's filter directory (src/catalogue/snapshot/directory.ts). */
export const directoryKey = (id: string) => `catalogue/directories/${id}.json`;
/**
 * Where a segment's part index is kept: in the CatalogueBuilder's storage, not R2, as only a build
 * reads it (a read of the object's own storage, no parse, no subrequest). Unique per build, step and
 * segment written, so a kept segment keeps pointing at its index.
 */
export const PART_INDEX_PREFIX = "parts:";
export const partIndexKey = (buildId: string, step: number, n: number) => `${PART_INDEX_PREFIX}${buildId}/${step}/${n}`;

/** A byte range of an R2 object. */
export const Extent = z.object({ key: z.string(), offset: z.int(), bytes: z.int() });
export type Extent = z.infer<typeof Extent>;

/** A summary's set of values beyond this many is stored as null: "may hold any value". */
export const MAX_SUMMARY_VALUES = 64;

/** CRC-32 and length of uncompressed data: what the gzip trailer is combined from (gzip-member.ts `Checked`). */
const Checksum = z.object({ crc: z.int(), length: z.int() }) satisfies z.ZodType<Checked>;

const SegmentForm = Checksum.extend({
  /** The stored (compressed) size. */
  bytes: z.int(),
  /**
   * Where the form's bytes are, in order: runs of parts lying one after another in an object (JSON:
   * with a stored "," between each two parts of a run, and one put between runs when streamed).
   */
  extents: z.array(Extent),
});

/** What filters need to skip a segment or a part: null sets hold too many values to list. */
const Summary = z.object({
  maxUpdatedAt: z.string(),
  brands: z.array(z.string()).nullable(),
  categories: z.array(z.string()).nullable(),
  /** Offers per competitor id: the competitor filter and GET /competitors. */
  offers: z.record(z.string(), z.int()),
});
export type Summary = z.infer<typeof Summary>;

/**
 * A range of a segment's NDJSON form that a product read takes alone: the first product id it holds, the form's
 * extent it lies in (an index into `extents`), and its offset and size in that extent's object. A tuple, as a
 * manifest holds about eight a segment (1,000,000 products: ~8,000).
 */
const NdjsonRead = z.tuple([z.string(), z.int(), z.int(), z.int()]);
export type NdjsonRead = z.infer<typeof NdjsonRead>;

/**
 * Products whose ids are at or above `first` and below the next segment's `first` (the first
 * segment's `first` is "", so it also takes any new id below the rest). Each form is a sequence of
 * raw deflate parts (src/catalogue/snapshot/gzip-member.ts) of up to twice partTarget products, so it is
 * itself a piece of one deflate stream, stored as byte ranges (extents) of the objects the build
 * steps wrote: an incremental build writes only the parts it re-encoded and points at the others
 * where they already are. `json` holds the products joined by "," (a piece of the `{"products":[…]}`
 * body), `ndjson` one per line. `parts` is the key of its part index (partIndexKey).
 */
export const Segment = z
  .object({
    first: z.string(),
    count: z.int(),
    json: SegmentForm,
    ndjson: SegmentForm,
    /**
     * The NDJSON form cut at part boundaries into ranges of about 128 products (segments.ts), so one product is
     * read (and inflated) from its range alone (src/catalogue/snapshot/product-read.ts). Absent in a manifest built
     * before it: the whole form is read.
     */
    ndjsonReads: z.array(NdjsonRead).optional(),
    parts: z.string(),
    /** Where its parts' ReadPart index is: what a filtered read reads of a segment before its products. */
    index: Extent,
  })
  .extend(Summary.shape);
export type Segment = z.infer<typeof Segment>;

/** A part's form: compressed size, CRC-32 and length, and where its bytes are. */
const PartForm = Checksum.extend({ bytes: z.int(), key: z.string(), offset: z.int() });

/**
 * One part of a segment: products from `first` (inclusive) below the next part's `first`, and each
 * form's size, checksum and place. An incremental build keeps an unchanged part where it is.
 */
export const Part = z
  .object({
    first: z.string(),
    count: z.int(),
    json: PartForm,
    ndjson: PartForm,
    /** Its products' SKUs, in id order (a part holds at most twice partTarget products): the `sku` filter. */
    skus: z.array(z.string()),
    /** Its products' ids, in id order: which lists a rewritten part's products leave (src/catalogue/snapshot/value-lists.ts). */
    ids: z.array(z.string()),
    /** What each product is filtered by, in id order (FilterRow): so a part is read only when one of its products matches every filter. */
    rows: z.array(z.array(z.int())),
  })
  .extend(Summary.shape);
export type Part = z.infer<typeof Part>;

/**
 * A product's filter values in its part: the index of its brand in the part's `brands` and of its category in
 * `categories` (-1 for none), its updated_at in ms, then the indexes of its competitors in the part's sorted
 * competitor ids (partCompetitors). Exact: a part holds fewer products than MAX_SUMMARY_VALUES, so its sets are lists.
 */
export type FilterRow = [brand: number, category: number, updatedAt: number, ...competitors: number[]];
/** A part's competitor ids, in the order its rows name them. */
export const partCompetitors = (part: Pick<Part, "offers">) => Object.keys(part.offers).sort();

/**
 * A part as a filtered read sees it (the segment's `index` extent holds its parts' in order): where its NDJSON
 * bytes are, and what it holds. Its summaries are exact, as a part holds fewer products than MAX_SUMMARY_VALUES.
 */
export const ReadPart = z.object({
  first: z.string(),
  count: z.int(),
  ndjson: Extent,
  maxUpdatedAt: z.string(),
  brands: z.array(z.string()).nullable(),
  categories: z.array(z.string()).nullable(),
  competitors: z.array(z.string()),
  skus: z.array(z.string()),
  rows: z.array(z.array(z.int())),
});
export type ReadPart = z.infer<typeof ReadPart>;

export const Manifest = z.object({
  /** Unique per build; the ETag is made of it. */
  id: z.string(),
  /** The catalogue_state.version the build started from: every change up to it is in the snapshot. */
  version: z.int(),
  builtAt: z.string(),
  products: z.int(),
  segments: z.array(Segment),
  competitors: z.array(Competitor),
  /** CRC-32 and length of each form's whole uncompressed body (bodyParts): the gzip trailer, so serving only streams. */
  body: z.object({ json: Checksum, ndjson: Checksum }),
  /** The R2 key of the snapshot's filter directory (directoryKey). */
  directory: z.string(),
  /** The R2 objects its directory's value lists use (src/catalogue/snapshot/value-lists.ts): what retention must keep. */
  listObjects: z.array(z.string()),
});
export type Manifest = z.infer<typeof Manifest>;

/** Every R2 object of a snapshot: its segments' and its lists' (each once), its filter directory and then its manifest, deleted in that order. */
export function snapshotObjects(manifest: Pick<Manifest, "id" | "segments" | "directory" | "listObjects">): string[] {
  const keys = new Set<string>();
  for (const segment of manifest.segments) {
    for (const extent of [...segment.json.extents, ...segment.ndjson.extents, segment.index]) keys.add(extent.key);
  }
  for (const key of manifest.listObjects) keys.add(key);
  return [...keys, manifest.directory, manifestKey(manifest.id)];
}

/** `GET /competitors`: the competitors with their offers counted from the segments' summaries. */
export function competitorViews(rows: readonly CompetitorRow[], segments: readonly Segment[]): CompetitorView[] {
  const counts = new Map<string, number>();
  for (const segment of segments) for (const [id, n] of Object.entries(segment.offers)) counts.set(id, (counts.get(id) ?? 0) + n);
  return rows.map((row) => ({ id: row.id, name: row.name, domain: row.domain, offer_count: counts.get(row.id) ?? 0 }));
}

/** The current manifest, and the version it holds (so a check for changes needs no manifest read). */
export const Pointer = z.object({ manifest: z.string(), version: z.int() });
export type Pointer = z.infer<typeof Pointer>;

/** The pointer, or null before the first snapshot: validated, as every reader of R2 reads it. */
export async function readPointer(bucket: R2Bucket): Promise<Pointer | null> {
  const object = await bucket.get(POINTER_KEY);
  return object ? Pointer.parse(await object.json()) : null;
}

/** A manifest, validated; null when it is not in R2 (a replaced one already collected). */
export async function findManifest(bucket: R2Bucket, id: string): Promise<Manifest | null> {
  const object = await bucket.get(manifestKey(id));
  return object ? Manifest.parse(await object.json()) : null;
}

export async function readManifest(bucket: R2Bucket, id: string): Promise<Manifest> {
  const manifest = await findManifest(bucket, id);
  if (!manifest) throw new Error(`The catalogue manifest ${id} is missing from R2`);
  return manifest;
}

/** A byte range of an R2 object, read. */
export async function readExtent(bucket: R2Bucket, { key, offset, bytes }: Extent): Promise<Uint8Array> {
  const object = await bucket.get(key, { range: { offset, length: bytes } });
  if (!object) throw new Error(`The catalogue object ${key} is missing from R2`);
  return new Uint8Array(await object.arrayBuffer());
}

/** The segment whose id range holds `id`: the last one whose `first` is not above it. */
export function segmentIndexOf(segments: readonly Pick<Segment, "first">[], id: string): number {
  let low = 0;
  let high = segments.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (segments[mid]!.first <= id) low = mid;
    else high = mid - 1;
  }
  return low;
}

const LIST_OPEN = storedPart('{"products":[');
/** The stored block of "," between JSON products of two parts or two segments (5 bytes of block header and the comma). */
export const JSON_SEPARATOR = storedPart(",");
const LIST_CLOSE = storedPart("]}");

/**
 * A form's whole body, in order, as deflate pieces: the segments' forms and, for JSON, the stored
 * blocks of `{"products":[`, the commas between segments and `]}`: what the build combines the
 * body's CRC-32 from.
 */
export const bodyParts = (segments: readonly Segment[], form: "json" | "ndjson"): Checked[] =>
  listParts(
    segments.map((segment) => segment[form]),
    form,
  );

/** Pieces of products (each its products joined as the form joins them) as a whole body: JSON adds the list's brackets and commas. */
export function listParts<Piece extends Checked>(pieces: readonly Piece[], form: "json" | "ndjson"): (Piece | Deflated)[] {
  if (form === "ndjson") return [...pieces];
  return [LIST_OPEN, ...pieces.flatMap((piece, i) => (i === 0 ? [piece] : [JSON_SEPARATOR, piece])), LIST_CLOSE];
}

/**
 * Extents in order with those that follow one another in an object joined into one (JSON: a stored
 * "," between the two, as between two parts): what is read as one range.
 */
export function mergedExtents(extents: Iterable<Extent>, form: "json" | "ndjson"): Extent[] {
  const gap = form === "json" ? JSON_SEPARATOR.bytes.length : 0;
  const merged: Extent[] = [];
  for (const { key, offset, bytes } of extents) {
    const last = merged.at(-1);
    if (last && last.key === key && last.offset + last.bytes + gap === offset) last.bytes += gap + bytes;
    else merged.push({ key, offset, bytes });
  }
  return merged;
}

/**
 * The same body as a response streams it: byte ranges of R2 objects and bytes at hand. JSON puts a
 * stored "," between two extents (of one segment or of two), as between two parts: a segment's JSON
 * checksum covers its parts joined that way.
 */
export function bodyExtents(segments: readonly Segment[], form: "json" | "ndjson"): (Extent | Uint8Array)[] {
  // Ranges that follow one another in an object (segments written by one step) are read as one.
  const extents = mergedExtents(
    segments.flatMap((segment) => segment[form].extents),
    form,
  );
  if (form === "ndjson") return extents;
  return [LIST_OPEN.bytes, ...extents.flatMap((extent, i) => (i === 0 ? [extent] : [JSON_SEPARATOR.bytes, extent])), LIST_CLOSE.bytes];
}
