import { z } from "zod";
import { type Checked, storedPart } from "./gzip-member.ts";
import { Competitor } from "./schema.ts";

/**
 * The catalogue snapshot's layout in R2 (binding CATALOGUE), described in docs/catalogue.md:
 * immutable segment objects and manifests, and one small mutable pointer naming the current manifest.
 */

/**
 * Version 2: segments as raw deflate parts of one gzip member. The first layout's pointer
 * (catalogue/current.json) named snapshots of concatenated gzip members, which this code does not
 * serve: after a deploy, the builder makes a new snapshot before the first catalogue answer.
 */
export const POINTER_KEY = "catalogue/current.v2.json";
/** The first layout's pointer (concatenated gzip members): read once, so the first build after the upgrade retires that snapshot. */
export const LEGACY_POINTER_KEY = "catalogue/current.json";
export const manifestKey = (id: string) => `catalogue/manifests/${id}.json`;
/** A segment's objects: each form's parts one after another, and the index of its parts (PartIndex). */
export const segmentKeys = (buildId: string, label: string) => ({
  json: `catalogue/segments/${buildId}/${label}.json.deflate`,
  ndjson: `catalogue/segments/${buildId}/${label}.ndjson.deflate`,
  parts: `catalogue/segments/${buildId}/${label}.parts.json`,
});

/** A summary's set of values beyond this many is stored as null: "may hold any value". */
export const MAX_SUMMARY_VALUES = 64;

/** CRC-32 and length of uncompressed data: what the gzip trailer is combined from (gzip-member.ts `Checked`). */
const Checksum = z.object({ crc: z.int(), length: z.int() }) satisfies z.ZodType<Checked>;

const SegmentForm = Checksum.extend({
  key: z.string(),
  /** The stored (compressed) size. */
  bytes: z.int(),
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
 * Products whose ids are at or above `first` and below the next segment's `first` (the first
 * segment's `first` is "", so it also takes any new id below the rest). Each form is one R2 object:
 * the segment's parts one after another, each a raw deflate part (src/catalogue/gzip-member.ts) of
 * up to PART_MAX products, so the object is itself a piece of one deflate stream. `json` holds the
 * products joined by "," (a piece of the `{"products":[…]}` body), `ndjson` one per line. `parts`
 * names the segment's PartIndex (absent in snapshots built before parts: such a segment is
 * re-encoded whole when one of its products changes).
 */
export const Segment = z
  .object({
    first: z.string(),
    count: z.int(),
    json: SegmentForm,
    ndjson: SegmentForm,
    parts: z.string().optional(),
  })
  .extend(Summary.shape);
export type Segment = z.infer<typeof Segment>;

/**
 * One part of a segment: products from `first` (inclusive) below the next part's `first`, and the
 * compressed size, CRC-32 and length of each form. A part's bytes sit in the segment's object right
 * after the parts before it, so an incremental build copies an unchanged part's bytes as they are.
 */
export const Part = z
  .object({ first: z.string(), count: z.int(), json: Checksum.extend({ bytes: z.int() }), ndjson: Checksum.extend({ bytes: z.int() }) })
  .extend(Summary.shape);
export type Part = z.infer<typeof Part>;

/** A segment's parts, in id order (its `parts` object): what an incremental build reads of a segment it rewrites. */
export const PartIndex = z.array(Part);
export type PartIndex = z.infer<typeof PartIndex>;

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
});
export type Manifest = z.infer<typeof Manifest>;

/** The current manifest, and the version it holds (so a check for changes needs no manifest read). */
export const Pointer = z.object({ manifest: z.string(), version: z.int() });
export type Pointer = z.infer<typeof Pointer>;

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

/** A piece of a body: a segment's object in R2, or bytes at hand. */
export type BodyPart = Checked & ({ key: string } | { bytes: Uint8Array });

const LIST_OPEN = storedPart('{"products":[');
/** The stored block of "," between JSON products of two parts or two segments (5 bytes of block header and the comma). */
export const JSON_SEPARATOR = storedPart(",");
const LIST_CLOSE = storedPart("]}");

/**
 * A form's whole body, in order, as deflate parts: the segments' stored objects and, for JSON, the
 * stored blocks of `{"products":[`, the commas between segments and `]}`. The build combines the
 * body's CRC-32 from these, and a response streams them: one layout for both.
 */
export function bodyParts(segments: readonly Segment[], form: "json" | "ndjson"): BodyPart[] {
  const stored = segments.map((segment) => segment[form]);
  if (form === "ndjson") return stored;
  return [LIST_OPEN, ...stored.flatMap((part, i) => (i === 0 ? [part] : [JSON_SEPARATOR, part])), LIST_CLOSE];
}
