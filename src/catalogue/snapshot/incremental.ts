import { sql } from "drizzle-orm";
import pLimit from "p-limit";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import { products } from "../../platform/tables.ts";
import type { CompetitorRow } from "../views.ts";
import { compacted, extentCap } from "./compaction.ts";
import { changedInRange, type Encoded, encodeParts, type Piece, type Range, readRanges } from "./encode.ts";
import type { BuildDeps } from "./limits.ts";
import { type Part, type Segment, segmentIndexOf } from "./manifest.ts";
import { assembleSegment, type StepObjects, segmentGroups } from "./segments.ts";

/**
 * An incremental build's segment rewrite: which parts of a previous segment hold a change (its part
 * index from the builder's storage, its changed ids from D1), and the segment again with those parts
 * re-encoded and the others kept where they are.
 */

/** Previous segments' part indexes, from the builder's storage (written there by the step that wrote each segment). */
async function readPartIndexes(storage: DurableObjectStorage, segments: readonly Segment[]): Promise<Part[][]> {
  const found = await storage.get<Part[]>(segments.map((segment) => segment.parts));
  return segments.map((segment) => {
    const parts = found.get(segment.parts);
    // startBuild (build.ts) checked that the builder's storage holds the snapshot's indexes (else the build is full).
    if (!parts) throw new Error(`The part index ${segment.parts} is missing from the catalogue builder's storage`);
    return parts;
  });
}

/** A previous segment an incremental step rewrites: its part index, and which parts hold a product changed after `base`. */
export interface SegmentChanges {
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
 * Where the changes in previous segments `indexes` (consecutive dirty segments) are: one D1 statement
 * for the ids changed after `base` in their id range, beside their part indexes from the builder's
 * storage. `fewChanges`: the scan read fewer changed ids than the range holds products (changedInRange).
 */
export async function findChanges(
  deps: BuildDeps,
  base: number,
  segments: readonly Segment[],
  indexes: readonly number[],
  fewChanges: boolean,
): Promise<SegmentChanges[]> {
  const first = segmentRange(segments, indexes[0]!).first;
  const below = segmentRange(segments, indexes[indexes.length - 1]!).below;
  const [changed, indexesRead] = await Promise.all([
    deps.db
      .select({ id: products.id })
      .from(products)
      .where(changedInRange(base, (id) => [sql`${id} >= ${first}`, below === null ? undefined : sql`${id} < ${below}`], fewChanges)),
    readPartIndexes(
      deps.storage,
      indexes.map((i) => segments[i]!),
    ),
  ]);
  const ids = new Map<number, string[]>(indexes.map((i) => [i, []]));
  // Ids of segments in the range but not among `indexes` (changed after the scan) wait for the next build.
  for (const row of changed) ids.get(segmentIndexOf(segments, row.id))?.push(row.id);
  return indexes.map((i, k) => {
    const parts = indexesRead[k]!;
    const dirty = new Set(ids.get(i)!.map((changedId) => segmentIndexOf(parts, changedId)));
    return { i, parts, dirty: [...dirty].sort((a, b) => a - b) };
  });
}

/**
 * The segments replacing `changes`' (in order): their changed parts' products read in one D1 batch and
 * re-encoded, the other parts kept where they are, and a group that would take over extentCap ranges
 * compacted. Usually one segment each; none for a segment that holds no product any more; several
 * for one grown past twice segmentTarget.
 */
export async function rewriteSegments(
  deps: BuildDeps,
  objects: StepObjects,
  segments: readonly Segment[],
  changes: readonly SegmentChanges[],
  names: ReadonlyMap<string, CompetitorRow>,
): Promise<Segment[][]> {
  const ranges = changes.flatMap(({ i, parts, dirty }) => dirty.map((j) => partRange(segmentRange(segments, i), parts, j)));
  const fresh = new Map<string, Encoded[]>(ranges.map((range) => [range.first, []]));
  const owner = new Map(changes.map((change) => [change.i, change]));
  const items = await readRanges(deps, ranges, names);
  // The lists take every product re-encoded (so their lines are the snapshot's), and lose those that left them.
  objects.lists.add(items);
  objects.lists.leave(
    changes.flatMap(({ parts, dirty }) => dirty.map((j) => parts[j]!)),
    new Map(items.map((item) => [item.id, item])),
  );
  for (const item of items) {
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
