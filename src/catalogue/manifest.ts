import { z } from "zod";
import { Competitor } from "./schema.ts";

/**
 * The catalogue snapshot's layout in R2 (binding CATALOGUE), described in docs/catalogue.md:
 * immutable segment objects and manifests, and one small mutable pointer naming the current manifest.
 */

export const POINTER_KEY = "catalogue/current.json";
export const manifestKey = (id: string) => `catalogue/manifests/${id}.json`;
export const segmentKeys = (buildId: string, n: number) => ({
  json: `catalogue/segments/${buildId}/${n}.json.gz`,
  ndjson: `catalogue/segments/${buildId}/${n}.ndjson.gz`,
});

/** A summary's set of values beyond this many is stored as null: "may hold any value". */
export const MAX_SUMMARY_VALUES = 64;

/**
 * Products whose ids are at or above `first` and below the next segment's `first` (the first
 * segment's `first` is "", so it also takes any new id below the rest). Each form is one gzip member:
 * `json` the products joined by "," (a piece of the `{"products":[…]}` body), `ndjson` one per line.
 */
export const Segment = z.object({
  first: z.string(),
  count: z.int(),
  json: z.object({ key: z.string(), bytes: z.int() }),
  ndjson: z.object({ key: z.string(), bytes: z.int() }),
  /** Uncompressed size of the JSON form. */
  rawBytes: z.int(),
  /** What filters need to skip the segment: null sets hold too many values to list. */
  maxUpdatedAt: z.string(),
  brands: z.array(z.string()).nullable(),
  categories: z.array(z.string()).nullable(),
  /** Offers per competitor id in this segment: the competitor filter and GET /competitors. */
  offers: z.record(z.string(), z.int()),
});
export type Segment = z.infer<typeof Segment>;

export const Manifest = z.object({
  /** Unique per build; the ETag is made of it. */
  id: z.string(),
  /** The catalogue_state.version the build started from: every change up to it is in the snapshot. */
  version: z.int(),
  builtAt: z.string(),
  products: z.int(),
  segments: z.array(Segment),
  competitors: z.array(Competitor),
  /** Base64 gzip members of `{"products":[`, `,` and `]}`, so a gzip response needs no compression work. */
  gzipParts: z.object({ open: z.string(), comma: z.string(), close: z.string() }),
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

/** One gzip member holding `text`. */
export const gzip = async (text: string) => new Uint8Array(await new Response(new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer());
const base64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));

/** The manifest's `gzipParts`. */
export async function gzipParts(): Promise<Manifest["gzipParts"]> {
  const [open, comma, close] = await Promise.all(['{"products":[', ",", "]}"].map(gzip));
  return { open: base64(open!), comma: base64(comma!), close: base64(close!) };
}
