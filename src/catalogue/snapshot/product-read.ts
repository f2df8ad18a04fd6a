import { isolateMap, onForget } from "../../platform/isolate-memory.ts";
import { type Extent, type Manifest, type Segment, segmentIndexOf } from "./manifest.ts";
import { extentLines, idOf } from "./read.ts";

/**
 * One product from the snapshot being served: of the segment whose id range holds it, the one NDJSON range that holds
 * its id (the segment's `ndjsonReads`): one R2 read of about 128 products, however fragmented incremental builds left
 * the segment, so a read inflates a tenth of a segment. What is read is kept by this isolate, so a product near one
 * asked for lately costs no read at all. A range is named by where its bytes are (immutable objects: a build that
 * leaves them alone keeps them where they were), not by the snapshot, so a new build does not empty the cache.
 */

/** Characters of product JSON this isolate keeps (about 40 ranges' worth at ~1.6 KB a product): a bound on its memory. */
const KEPT_CHARS = 8_000_000;

/** Kept ranges' lines (each a product's JSON, in id order), oldest use first. */
const kept = isolateMap<string, string[]>();
let keptChars = 0;
onForget(() => {
  keptChars = 0;
});

const rangeName = (extents: readonly Extent[]) => extents.map(({ key, offset, bytes }) => `${key}@${offset}+${bytes}`).join(",");

/** The extents to read for `id`: the range whose first id is the last not above it, or the whole form without `ndjsonReads`. */
function extentsFor(segment: Segment, id: string): Extent[] {
  const reads = segment.ndjsonReads;
  if (!reads || reads.length === 0) return segment.ndjson.extents;
  const [, extent, offset, bytes] =
    reads[
      segmentIndexOf(
        reads.map(([first]) => ({ first })),
        id,
      )
    ]!;
  return [{ key: segment.ndjson.extents[extent]!.key, offset, bytes }];
}

function keep(name: string, lines: string[]) {
  kept.set(name, lines);
  keptChars += lines.reduce((sum, line) => sum + line.length, 0);
  for (const [oldest, its] of kept) {
    if (keptChars <= KEPT_CHARS || oldest === name) break;
    kept.delete(oldest);
    keptChars -= its.reduce((sum, line) => sum + line.length, 0);
  }
}

/** Forgets every kept range: the next read of each is a cold one (the tests measure that path). */
export function forgetKeptSegments(): void {
  kept.clear();
  keptChars = 0;
}

async function rangeLines(bucket: R2Bucket, extents: readonly Extent[]): Promise<string[]> {
  const name = rangeName(extents);
  const cached = kept.get(name);
  if (cached) {
    kept.delete(name);
    kept.set(name, cached); // the newest use
    return cached;
  }
  const lines: string[] = [];
  for await (const batch of extentLines(bucket, extents)) lines.push(...batch);
  keep(name, lines);
  return lines;
}

/** The product's JSON as the snapshot holds it (the bytes GET /products/:id sends), or undefined when it holds no such id. */
export async function snapshotProduct(bucket: R2Bucket, manifest: Manifest, id: string): Promise<string | undefined> {
  if (manifest.segments.length === 0) return undefined;
  const segment = manifest.segments[segmentIndexOf(manifest.segments, id)]!;
  if (segment.ndjson.extents.length === 0) return undefined;
  const lines = await rangeLines(bucket, extentsFor(segment, id));
  let low = 0;
  let high = lines.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const at = idOf(lines[mid]!);
    if (at === id) return lines[mid];
    if (at < id) low = mid + 1;
    else high = mid - 1;
  }
  return undefined;
}
