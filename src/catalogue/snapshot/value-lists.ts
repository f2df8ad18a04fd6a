import { z } from "zod";
import type { Encoded } from "./encode.ts";
import { deflatePart, FINAL_BLOCK } from "./gzip-member.ts";
import type { BuildDeps } from "./limits.ts";
import { Extent, mergedExtents, type Part } from "./manifest.ts";
import { extentLines, idOf, linesOf } from "./read.ts";

/**
 * Per-value product lists (docs/catalogue.md, "Value lists"): each brand's and each category's products (lowercased,
 * as the filters compare them) kept together, in id order, as NDJSON lines the same as the snapshot's, so a filter on
 * one brand or one category reads a few ranges instead of one part per matching product scattered by random id.
 *
 * A list is pieces in the order they were written, a newer piece's line replacing an older one's for the same id:
 * - each build step writes, per value, a piece of the products it encoded (a full build: every product; an
 *   incremental one: every product of the parts it re-encoded, so a list's lines are always the snapshot's lines);
 * - the products of re-encoded parts that left a list (a brand or category changed, or no longer in the snapshot:
 *   src/catalogue/snapshot/encode.ts leaves out a product it cannot show) are removed from it by the same piece;
 * - once a list takes more than COMPACT_READS reads, or holds more than COMPACT_OVERLAY lines beyond its first run, the
 *   build's lists phase rewrites it as one piece: its products merged in id order, compressed again.
 * A published snapshot's lists are all compact, so a read takes at most COMPACT_READS ranges.
 */

/** The builder's storage: a list's pieces, by value (listKey), as the snapshot being built holds them. */
const LIST_PREFIX = "list:";
export const listKey = (dimension: "brand" | "category", value: string) => `${LIST_PREFIX}${dimension}:${value}`;

const ListPiece = z.object({
  /** Its lines (one deflate run of NDJSON); null when it only removes. */
  extent: Extent.nullable(),
  count: z.int(),
  /** The first and last product ids it names (its lines' and its removals'). */
  first: z.string(),
  last: z.string(),
  /** Ids that left the list (a brand or category changed, or no longer in the snapshot). */
  removed: z.array(z.string()),
});
type ListPiece = z.infer<typeof ListPiece>;
export const ValueList = z.object({ pieces: z.array(ListPiece) });
export type ValueList = z.infer<typeof ValueList>;

/** R2 reads a published list takes at most: its first run's ranges and one per later piece. */
export const COMPACT_READS = 16;
/** Lines beyond a list's first run it holds at most once published: what a read keeps in memory (compressed) to merge. */
const COMPACT_OVERLAY = 5000;

/** Pieces at the start that follow one another: lines and no removal, each piece's first id above the last one's last. */
function runLength(pieces: readonly ListPiece[]): number {
  let n = 0;
  const follows = (piece: ListPiece, before?: ListPiece) => !before || piece.first > before.last;
  while (n < pieces.length && pieces[n]!.extent !== null && pieces[n]!.removed.length === 0 && follows(pieces[n]!, pieces[n - 1])) n++;
  return n;
}

/** The ranges of a list's first run, read as one stream. */
const runExtents = (pieces: readonly ListPiece[]) =>
  mergedExtents(
    pieces.slice(0, runLength(pieces)).map((piece) => piece.extent!),
    "ndjson",
  );

/** R2 reads a read of the list takes: its first run's ranges, and one for each later piece that has lines. */
const listReads = (list: ValueList) =>
  runExtents(list.pieces).length + list.pieces.slice(runLength(list.pieces)).filter((piece) => piece.extent !== null).length;

/** Whether a list is as a published snapshot holds it (else the build's lists phase compacts it). */
export function isCompact(list: ValueList): boolean {
  const overlay = list.pieces.slice(runLength(list.pieces));
  return listReads(list) <= COMPACT_READS && overlay.reduce((sum, piece) => sum + piece.count + piece.removed.length, 0) <= COMPACT_OVERLAY;
}

// ---- Reading a list ---------------------------------------------------------------------------------

/** Lines in id order, with each line's id; a removal's lines are null. */
type Source = AsyncIterator<{ ids: string[]; lines: (string | null)[] }>;

async function* withIds(lines: AsyncGenerator<string[]>): AsyncGenerator<{ ids: string[]; lines: (string | null)[] }> {
  for await (const batch of lines) yield { ids: batch.map(idOf), lines: batch };
}

async function* removals(ids: readonly string[]): AsyncGenerator<{ ids: string[]; lines: (string | null)[] }> {
  yield { ids: [...ids], lines: ids.map(() => null) };
}

/** A source's place: its batch and the line it is at. */
class Cursor {
  ids: string[] = [];
  lines: (string | null)[] = [];
  at = 0;
  done = false;
  constructor(readonly source: Source) {}
  async ready(): Promise<void> {
    while (!this.done && this.at >= this.ids.length) {
      const next = await this.source.next();
      if (next.done) this.done = true;
      else Object.assign(this, { ids: next.value.ids, lines: next.value.lines, at: 0 });
    }
  }
}

/**
 * A list's products in id order, each as its newest piece has it, a batch at a time. The first run streams from R2
 * (one deflate stream over its ranges); each later piece is read whole (compressed, at most COMPACT_OVERLAY lines
 * once published) and inflated from memory, so the reads in flight never pass the connections a Worker has.
 */
export async function* listLines(bucket: R2Bucket, list: ValueList): AsyncGenerator<string[]> {
  const head = extentLines(bucket, runExtents(list.pieces));
  const overlay = list.pieces.slice(runLength(list.pieces));
  if (overlay.length === 0) return yield* head;
  // Read before the first run's stream starts (a generator reads nothing until asked): each is read whole.
  const deflated = await Promise.all(
    overlay.map(async ({ extent }) => {
      if (extent === null) return null;
      const object = await bucket.get(extent.key, { range: { offset: extent.offset, length: extent.bytes } });
      if (!object) throw new Error(`The value list object ${extent.key} is missing from R2`);
      return new Uint8Array(await object.arrayBuffer());
    }),
  );
  // A piece's lines and removals name different products, so their order among themselves does not matter.
  const sources: Source[] = [
    withIds(head),
    ...overlay.flatMap((piece, i) => {
      const bytes = deflated[i];
      return [
        ...(piece.removed.length > 0 ? [removals(piece.removed)] : []),
        ...(bytes ? [withIds(linesOf(new Blob([bytes, FINAL_BLOCK]).stream().pipeThrough(new DecompressionStream("deflate-raw"))))] : []),
      ];
    }),
  ];
  // Later sources are newer pieces: for an id several hold, the last one's line (or removal) is the product's.
  const cursors = sources.map((source) => new Cursor(source));
  for (;;) {
    await Promise.all(cursors.map((cursor) => cursor.ready()));
    const open = cursors.filter((cursor) => !cursor.done);
    if (open.length === 0) return;
    const out: string[] = [];
    // Lines while every open cursor has its batch at hand; then refill.
    while (open.every((cursor) => cursor.at < cursor.ids.length)) {
      let least = open[0]!.ids[open[0]!.at]!;
      for (const cursor of open) if (cursor.ids[cursor.at]! < least) least = cursor.ids[cursor.at]!;
      let line: string | null = null;
      for (const cursor of open) {
        if (cursor.ids[cursor.at] !== least) continue;
        line = cursor.lines[cursor.at]!;
        cursor.at++;
      }
      if (line !== null) out.push(line);
    }
    if (out.length > 0) yield out;
  }
}

// ---- Writing lists ----------------------------------------------------------------------------------

/** Lines a compaction compresses together: each chunk is a deflate part of its own, so memory follows the chunk. */
const LINES_PER_CHUNK = 1000;

/** What a build step adds to the lists: a piece per list it changed. */
export interface ListStep {
  pieces: Map<string, ListPiece>;
}

const removal = (ids: readonly string[]): ListPiece | null => {
  const sorted = [...new Set(ids)].sort();
  return sorted.length === 0 ? null : { extent: null, count: 0, first: sorted[0]!, last: sorted.at(-1)!, removed: sorted };
};

/** The lists a product (as encoded) is on. */
const listsOf = (item: Pick<Encoded, "brand" | "category">): string[] => [
  ...(item.brand === null ? [] : [listKey("brand", item.brand)]),
  ...(item.category === null ? [] : [listKey("category", item.category)]),
];

/**
 * What one build step adds to the lists: per list, the lines of the products it encoded, compressed as one piece,
 * the pieces one after another in the step's lists object; and the products that left a list (a changed brand or
 * category, or no longer in the snapshot).
 */
export class ListPieces {
  readonly #lines = new Map<string, { id: string; json: string }[]>();
  readonly #left = new Map<string, string[]>();

  add(items: readonly Encoded[]): void {
    for (const item of items) {
      for (const key of listsOf(item)) {
        let lines = this.#lines.get(key);
        if (!lines) this.#lines.set(key, (lines = []));
        lines.push({ id: item.id, json: item.json });
      }
    }
  }

  /**
   * The products of re-encoded parts (`before`, as the snapshot held them) that left a list: the lists each was on
   * and is not on now (`now`: the products encoded, by id; one absent left the snapshot).
   */
  leave(before: readonly Part[], now: ReadonlyMap<string, Encoded>): void {
    for (const part of before) {
      for (const [k, id] of part.ids.entries()) {
        const [brand, category] = part.rows[k]!;
        const was = listsOf({ brand: part.brands?.[brand!] ?? null, category: part.categories?.[category!] ?? null });
        const item = now.get(id);
        const is = new Set(item ? listsOf(item) : []);
        for (const key of was) {
          if (is.has(key)) continue;
          let ids = this.#left.get(key);
          if (!ids) this.#left.set(key, (ids = []));
          ids.push(id);
        }
      }
    }
  }

  /** The step's object (bytes) and each list's piece in it. */
  encode(objectKey: string): ListStep & { bytes: Uint8Array[] } {
    const bytes: Uint8Array[] = [];
    const pieces = new Map<string, ListPiece>();
    let offset = 0;
    for (const key of [...new Set([...this.#lines.keys(), ...this.#left.keys()])].sort()) {
      const lines = (this.#lines.get(key) ?? []).sort((a, b) => (a.id < b.id ? -1 : 1));
      const left = removal(this.#left.get(key) ?? []);
      if (lines.length === 0) {
        pieces.set(key, left!);
        continue;
      }
      const part = deflatePart(lines.map((line) => `${line.json}\n`).join(""));
      bytes.push(part.bytes);
      const first = lines[0]!.id < (left?.first ?? "\uffff") ? lines[0]!.id : left!.first;
      const last = lines.at(-1)!.id > (left?.last ?? "") ? lines.at(-1)!.id : left!.last;
      pieces.set(key, {
        extent: { key: objectKey, offset, bytes: part.bytes.length },
        count: lines.length,
        first,
        last,
        removed: left?.removed ?? [],
      });
      offset += part.bytes.length;
    }
    return { bytes, pieces };
  }
}

const STORAGE_KEYS = 128;

/** The builder's storage as a step writes it (a transaction's too). */
type Storage = Pick<DurableObjectTransaction, "get" | "put" | "delete" | "list">;

/** Every list the builder's storage holds, by key. */
export async function storedLists(storage: Storage): Promise<Map<string, ValueList>> {
  return storage.list<ValueList>({ prefix: LIST_PREFIX });
}

/** A step's pieces appended to the lists in the builder's storage, in the step's own transaction; a full build's first step starts every list afresh. */
export async function appendPieces(storage: Storage, { pieces }: ListStep, fresh: boolean): Promise<void> {
  if (fresh) {
    const keys = [...(await storedLists(storage)).keys()];
    for (let i = 0; i < keys.length; i += STORAGE_KEYS) await storage.delete(keys.slice(i, i + STORAGE_KEYS));
  }
  const keys = [...pieces.keys()];
  const updated: Record<string, ValueList> = {};
  for (let i = 0; i < keys.length; i += STORAGE_KEYS) {
    const stored = fresh ? new Map<string, ValueList>() : await storage.get<ValueList>(keys.slice(i, i + STORAGE_KEYS));
    for (const key of keys.slice(i, i + STORAGE_KEYS)) updated[key] = { pieces: [...(stored.get(key)?.pieces ?? []), pieces.get(key)!] };
  }
  await putLists(storage, updated);
}

/** Lists written to the builder's storage, STORAGE_KEYS a put. */
export async function putLists(storage: Storage, lists: Record<string, ValueList>): Promise<void> {
  const entries = Object.entries(lists);
  for (let i = 0; i < entries.length; i += STORAGE_KEYS) await storage.put(Object.fromEntries(entries.slice(i, i + STORAGE_KEYS)));
}

/** Compressed bytes a lists step writes at most before it stops taking lists (at least one is taken). */
const STEP_LIST_BYTES = 24 * 1024 * 1024;

/**
 * One step of the lists phase: the lists that are not compact, rewritten as one piece each, placed one after another in
 * the step's object (`objectKey`), until `reads` R2 reads or STEP_LIST_BYTES are used. Returns the lists rewritten,
 * for the step's storage write, and whether every list is compact.
 */
export async function compactLists(
  { bucket, storage, work }: Pick<BuildDeps, "bucket" | "storage" | "work">,
  objectKey: string,
  reads: number,
): Promise<{ updated: Record<string, ValueList>; done: boolean }> {
  const due = [...(await storedLists(storage))].filter(([, list]) => !isCompact(list));
  const chunks: Uint8Array[] = [];
  const updated: Record<string, ValueList> = {};
  let offset = 0;
  let used = 0;
  let taken = 0;
  for (const [key, list] of due) {
    const cost = listReads(list);
    if (taken > 0 && (used + cost > reads || offset > STEP_LIST_BYTES)) break;
    const start = offset;
    let count = 0;
    let first = "";
    let last = "";
    let pending: string[] = [];
    const flush = () => {
      if (pending.length === 0) return;
      const part = deflatePart(pending.join(""));
      chunks.push(part.bytes);
      offset += part.bytes.length;
      pending = [];
    };
    for await (const lines of listLines(bucket, list)) {
      for (const line of lines) {
        if (count === 0) first = idOf(line);
        last = idOf(line);
        count++;
        pending.push(`${line}\n`);
        if (pending.length >= LINES_PER_CHUNK) flush();
      }
    }
    flush();
    updated[key] = {
      pieces: count === 0 ? [] : [{ extent: { key: objectKey, offset: start, bytes: offset - start }, count, first, last, removed: [] }],
    };
    used += cost;
    taken++;
  }
  if (chunks.length > 0) await bucket.put(objectKey, new Blob(chunks));
  work.r2BytesWritten += offset;
  work.listBytesWritten += offset;
  return { updated, done: taken === due.length };
}
