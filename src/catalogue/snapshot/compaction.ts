import type { LimitFunction } from "p-limit";
import type { Piece } from "./encode.ts";
import { type Part, readExtent } from "./manifest.ts";

/**
 * Compaction: a segment form's ranges bounded. Each run of changed parts adds up to two ranges
 * (extents) to its segment, and each range is one R2 read when a full list is served; a segment past
 * its cap gets its shortest kept runs copied among the new parts, which joins them into one range.
 */

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
export const extentCap = (segments: number): number =>
  Math.max(4, Math.min(MAX_EXTENTS, Math.floor(RESPONSE_READS / Math.max(1, segments))));
/** Ranges a compaction leaves a segment's form (see compacted): room for a few more changes before the next. */
export const compactTo = (cap: number): number => Math.floor((3 * cap) / 4);

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

/**
 * Kept parts lying one after another, read back for a compaction: one range read per form, sliced
 * into each part's bytes (JSON parts have a stored "," between each two).
 */
async function readRun(bucket: R2Bucket, parts: readonly Part[]): Promise<NonNullable<Piece["bytes"]>[]> {
  const read = async (form: "json" | "ndjson") => {
    const first = parts[0]![form];
    const last = parts[parts.length - 1]![form];
    const bytes = await readExtent(bucket, { key: first.key, offset: first.offset, bytes: last.offset + last.bytes - first.offset });
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
export async function compacted(bucket: R2Bucket, group: readonly Piece[], cap: number, limit: LimitFunction): Promise<Piece[]> {
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
