import { Buffer } from "node:buffer";
import { z } from "zod";
import { isolateMap } from "../../platform/isolate-memory.ts";
import type { BuildDeps } from "./limits.ts";
import { directoryKey, type Part, type Segment } from "./manifest.ts";
import { storedLists, ValueList } from "./value-lists.ts";

/**
 * A snapshot's filter directory (docs/catalogue.md, "Filtered reads"): which segments hold each brand and category
 * (lowercased, exactly), and for each segment a Bloom filter of its SKUs. A filtered read looks here first, so a
 * filter matching nothing is answered from memory, and one that matches reads only the segments that may hold it.
 *
 * Each segment's share (SegmentValues) is made when the segment is written and kept in the builder's storage
 * beside its part index; the last step of a build puts the segments' shares together in segment order. Its size
 * follows the segments' distinct values, not their products: about 1.5 KB of SKU filter per 1,000 products.
 */

/** Bits of a segment's SKU filter per SKU, and the hashes each sets: about 0.3 % false positives. */
const BITS_PER_SKU = 12;
const HASHES = 8;

/** What one segment adds to the directory. */
export interface SegmentValues {
  brands: string[];
  categories: string[];
  /** Base64 of the Bloom filter of its SKUs. */
  skus: string;
}

/** Where a segment's values are kept in the builder's storage: beside its part index, named after it. */
export const valuesKey = (partIndexKey: string) => `values:${partIndexKey}`;

export const Directory = z.object({
  brands: z.record(z.string(), z.array(z.int())),
  categories: z.record(z.string(), z.array(z.int())),
  /** Each segment's SKU filter (base64), in segment order. */
  skus: z.array(z.string()),
  /** Each brand's and category's products together (src/catalogue/snapshot/value-lists.ts), by listKey. */
  lists: z.record(z.string(), ValueList),
});
export type Directory = z.infer<typeof Directory>;

/** FNV-1a over the string's UTF-16 code units, from `basis`. */
function fnv1a(text: string, basis: number): number {
  let hash = basis;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash;
}

/** The filter's bit positions for a SKU: double hashing over two FNV-1a hashes. */
function bitsOf(sku: string, bits: number): number[] {
  const a = fnv1a(sku, 0x811c9dc5);
  const b = fnv1a(sku, 0x01000193) | 1;
  return Array.from({ length: HASHES }, (_, i) => ((a + Math.imul(i, b)) >>> 0) % bits);
}

function skuFilter(skus: readonly string[]): string {
  const bytes = new Uint8Array(Math.max(8, Math.ceil((skus.length * BITS_PER_SKU) / 8)));
  for (const sku of skus) for (const bit of bitsOf(sku, bytes.length * 8)) bytes[bit >> 3]! |= 1 << (bit & 7);
  return Buffer.from(bytes).toString("base64");
}

/** SKU filters decoded by this isolate, by their text. */
const decoded = isolateMap<string, Uint8Array>();

/** Whether a segment's SKU filter may hold `sku` (false: it certainly does not). */
export function filterMayHold(filter: string, sku: string): boolean {
  let bytes = decoded.get(filter);
  if (!bytes) {
    bytes = new Uint8Array(Buffer.from(filter, "base64"));
    // The filters of one directory at most (a snapshot's segments), then afresh.
    if (decoded.size > 4096) decoded.clear();
    decoded.set(filter, bytes);
  }
  const filterBytes = bytes;
  return bitsOf(sku, filterBytes.length * 8).every((bit) => (filterBytes[bit >> 3]! & (1 << (bit & 7))) !== 0);
}

const distinct = (sets: readonly (readonly string[] | null)[]) => [...new Set(sets.flatMap((set) => set ?? []))].sort();

/** A segment's values, from its parts (whose summaries are exact: a part holds fewer products than a summary lists). */
export function segmentValues(parts: readonly Part[]): SegmentValues {
  return {
    brands: distinct(parts.map((part) => part.brands)),
    categories: distinct(parts.map((part) => part.categories)),
    skus: skuFilter(parts.flatMap((part) => part.skus)),
  };
}

/** The directory of segments whose values are given in segment order. */
function directoryOf(segments: readonly SegmentValues[], lists: Directory["lists"]): Directory {
  const brands: Record<string, number[]> = {};
  const categories: Record<string, number[]> = {};
  for (const [i, values] of segments.entries()) {
    for (const brand of values.brands) (brands[brand] ??= []).push(i);
    for (const category of values.categories) (categories[category] ??= []).push(i);
  }
  return { brands, categories, skus: segments.map((values) => values.skus), lists };
}

/** Keys a storage `get` takes at once. */
const STORAGE_KEYS_PER_GET = 128;

/**
 * The snapshot's filter directory, from its segments' values in the builder's storage (written beside their part
 * indexes; a read of about 2 KB per segment, the one part of the last step that follows the catalogue's size) and its
 * value lists (compacted by the build's lists phase). Returns its key and the R2 objects its lists use.
 */
export async function writeDirectory(
  deps: BuildDeps,
  id: string,
  segments: readonly Segment[],
): Promise<{ directory: string; listObjects: string[] }> {
  const keys = segments.map((segment) => valuesKey(segment.parts));
  const found = new Map<string, SegmentValues>();
  for (let i = 0; i < keys.length; i += STORAGE_KEYS_PER_GET) {
    for (const [key, values] of await deps.storage.get<SegmentValues>(keys.slice(i, i + STORAGE_KEYS_PER_GET))) found.set(key, values);
  }
  const values = keys.map((key) => {
    const held = found.get(key);
    if (!held) throw new Error(`The directory values ${key} are missing from the catalogue builder's storage`);
    return held;
  });
  const lists = Object.fromEntries(await storedLists(deps.storage));
  const listObjects = new Set(
    Object.values(lists).flatMap((list) => list.pieces.flatMap((piece) => (piece.extent ? [piece.extent.key] : []))),
  );
  const key = directoryKey(id);
  await deps.bucket.put(key, JSON.stringify(directoryOf(values, lists)));
  return { directory: key, listObjects: [...listObjects].sort() };
}
