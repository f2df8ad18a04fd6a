import { and, asc, eq, gt, gte, inArray, lt, type SQL, sql } from "drizzle-orm";
import { type Database, database } from "../platform/db.ts";
import { catalogueState, competitors, offers, products } from "../platform/tables.ts";
import { concatenated, deflatePart } from "./gzip-member.ts";
import {
  bodyParts,
  MAX_SUMMARY_VALUES,
  type Manifest,
  manifestKey,
  POINTER_KEY,
  type Pointer,
  type Segment,
  segmentIndexOf,
  segmentKeys,
} from "./manifest.ts";
import type { CompetitorView } from "./schema.ts";
import { type CompetitorRow, type OfferRow, productView } from "./views.ts";

/**
 * Builds a catalogue snapshot into R2 (docs/catalogue.md). Run only by the CatalogueBuilder object,
 * one build at a time. Memory stays bounded by one segment's products whatever the catalogue's size:
 * products are read from D1 a page at a time, by id range, and each segment is written before the next
 * is read. The pointer moves last, so a build that fails anywhere leaves the previous snapshot serving.
 */

/** A segment is built from pages of this many products; a full build makes segments this size. */
export const SEGMENT_TARGET = 1000;
/** A rebuilt segment over this many products is split into segments of about SEGMENT_TARGET. */
export const SEGMENT_MAX = 2000;
/** When more than this share of the segments changed, a full build costs about the same and is simpler. */
const FULL_BUILD_SHARE = 0.5;

export interface BuildOptions {
  /** Tests: throw after writing this many segments, as a failing R2 write would. */
  failAfterSegments?: number;
}

export interface BuildReport {
  /** False when the snapshot already held every change. */
  built: boolean;
  manifest: string | null;
  version: number;
  full: boolean;
  segmentsWritten: number;
  products: number;
  ms: number;
}

interface Encoded {
  id: string;
  json: string;
  brand: string | null;
  category: string | null;
  updatedAt: string;
  competitorIds: string[];
}

export async function readPointer(bucket: R2Bucket, key = POINTER_KEY): Promise<Pointer | null> {
  const object = await bucket.get(key);
  return object ? ((await object.json()) as Pointer) : null;
}

export async function readManifest(bucket: R2Bucket, id: string): Promise<Manifest> {
  const object = await bucket.get(manifestKey(id));
  if (!object) throw new Error(`The catalogue manifest ${id} is missing from R2`);
  return (await object.json()) as Manifest;
}

/** One page of products in id order, from `from` (inclusive or not) and below `below`, with their offers, in one batch. */
async function readPage(
  db: Database,
  from: string,
  inclusive: boolean,
  below: string | null,
  names: ReadonlyMap<string, CompetitorRow>,
): Promise<Encoded[]> {
  const range = and(inclusive ? gte(products.id, from) : gt(products.id, from), below === null ? undefined : lt(products.id, below)) as SQL;
  const ids = db.select({ id: products.id }).from(products).where(range).orderBy(asc(products.id)).limit(SEGMENT_TARGET);
  const [rows, offerRows] = await db.batch([
    db.select().from(products).where(range).orderBy(asc(products.id)).limit(SEGMENT_TARGET),
    db.select().from(offers).where(inArray(offers.productId, ids)).orderBy(asc(offers.productId), asc(offers.competitorId)),
  ]);
  const byProduct = new Map<string, OfferRow[]>();
  for (const row of offerRows) {
    let list = byProduct.get(row.productId);
    if (!list) byProduct.set(row.productId, (list = []));
    list.push(row);
  }
  return rows.map((row) => {
    const own = byProduct.get(row.id) ?? [];
    return {
      id: row.id,
      json: JSON.stringify(productView(row, own, names)),
      brand: row.brand?.toLowerCase() ?? null,
      category: row.category?.toLowerCase() ?? null,
      updatedAt: row.updatedAt,
      competitorIds: own.map((offer) => offer.competitorId),
    };
  });
}

/** Every product from `first` (inclusive) below `below`, a page at a time. */
async function* productsInRange(
  db: Database,
  first: string,
  below: string | null,
  names: ReadonlyMap<string, CompetitorRow>,
): AsyncGenerator<Encoded[]> {
  let page = await readPage(db, first, true, below, names);
  while (page.length > 0) {
    yield page;
    if (page.length < SEGMENT_TARGET) return;
    page = await readPage(db, page[page.length - 1]!.id, false, below, names);
  }
}

const valueSet = (values: Iterable<string | null>) => {
  const set = new Set<string>();
  for (const value of values) if (value !== null) set.add(value);
  return set.size > MAX_SUMMARY_VALUES ? null : [...set].sort();
};

class SegmentWriter {
  written = 0;
  constructor(
    private readonly bucket: R2Bucket,
    private readonly buildId: string,
    private readonly options: BuildOptions,
  ) {}

  async write(first: string, items: readonly Encoded[]): Promise<Segment> {
    if (this.options.failAfterSegments !== undefined && this.written >= this.options.failAfterSegments) {
      throw new Error(`Injected failure after ${this.written} segments`);
    }
    const keys = segmentKeys(this.buildId, this.written);
    const json = deflatePart(items.map((item) => item.json).join(","));
    const ndjson = deflatePart(items.map((item) => `${item.json}\n`).join(""));
    await Promise.all([this.bucket.put(keys.json, json.bytes), this.bucket.put(keys.ndjson, ndjson.bytes)]);
    this.written++;
    const offerCounts: Record<string, number> = {};
    for (const item of items) for (const id of item.competitorIds) offerCounts[id] = (offerCounts[id] ?? 0) + 1;
    return {
      first,
      count: items.length,
      json: { key: keys.json, bytes: json.bytes.length, crc: json.crc, length: json.length },
      ndjson: { key: keys.ndjson, bytes: ndjson.bytes.length, crc: ndjson.crc, length: ndjson.length },
      maxUpdatedAt: items.reduce((max, item) => (item.updatedAt > max ? item.updatedAt : max), ""),
      brands: valueSet(items.map((item) => item.brand)),
      categories: valueSet(items.map((item) => item.category)),
      offers: offerCounts,
    };
  }
}

/** The segments of every product, SEGMENT_TARGET each. */
async function fullBuild(db: Database, names: ReadonlyMap<string, CompetitorRow>, writer: SegmentWriter): Promise<Segment[]> {
  const segments: Segment[] = [];
  for await (const page of productsInRange(db, "", null, names))
    segments.push(await writer.write(segments.length === 0 ? "" : page[0]!.id, page));
  return segments;
}

/** Indexes of the segments holding a product changed after `version`; read a page of ids at a time. */
async function changedSegments(db: Database, segments: readonly Segment[], version: number): Promise<Set<number>> {
  const changed = new Set<number>();
  // Keyset pages in (changed_version, id) order: the index on those two columns, never a scan of products.
  for (let after = { changedVersion: version, id: "\uffff" }; ; ) {
    const rows = await db
      .select({ id: products.id, changedVersion: products.changedVersion })
      .from(products)
      .where(
        and(
          gt(products.changedVersion, version),
          sql`(${products.changedVersion}, ${products.id}) > (${after.changedVersion}, ${after.id})`,
        ),
      )
      .orderBy(asc(products.changedVersion), asc(products.id))
      .limit(SEGMENT_TARGET);
    for (const { id } of rows) changed.add(segmentIndexOf(segments, id));
    if (rows.length < SEGMENT_TARGET) return changed;
    after = rows[rows.length - 1]!;
  }
}

/** Rewrites one segment's id range; one over SEGMENT_MAX products becomes several of about SEGMENT_TARGET. */
async function rebuildSegment(
  db: Database,
  names: ReadonlyMap<string, CompetitorRow>,
  writer: SegmentWriter,
  first: string,
  below: string | null,
): Promise<Segment[]> {
  const items: Encoded[] = [];
  for await (const page of productsInRange(db, first, below, names)) items.push(...page);
  if (items.length === 0) return [];
  const parts = items.length > SEGMENT_MAX ? Math.ceil(items.length / SEGMENT_TARGET) : 1;
  const size = Math.ceil(items.length / parts);
  const rebuilt: Segment[] = [];
  for (let start = 0; start < items.length; start += size) {
    rebuilt.push(await writer.write(start === 0 ? first : items[start]!.id, items.slice(start, start + size)));
  }
  return rebuilt;
}

function competitorViews(rows: readonly CompetitorRow[], segments: readonly Segment[]): CompetitorView[] {
  const counts = new Map<string, number>();
  for (const segment of segments) for (const [id, n] of Object.entries(segment.offers)) counts.set(id, (counts.get(id) ?? 0) + n);
  return rows.map((row) => ({ id: row.id, name: row.name, domain: row.domain, offer_count: counts.get(row.id) ?? 0 }));
}

/**
 * Brings the snapshot up to the catalogue version in D1: nothing when it already is; a full build for
 * the first snapshot or after a reset (the seed); otherwise only the segments of changed products.
 */
export async function buildSnapshot(env: Env, options: BuildOptions = {}): Promise<BuildReport> {
  const started = Date.now();
  const db = database(env.DB);
  const [stateRows, competitorRows] = await db.batch([
    db.select().from(catalogueState).where(eq(catalogueState.id, 1)),
    db.select().from(competitors).orderBy(asc(competitors.id)),
  ]);
  const version = stateRows[0]?.version ?? 0;
  const resetVersion = stateRows[0]?.resetVersion ?? 0;
  const pointer = await readPointer(env.CATALOGUE);
  const report = (built: boolean, full: boolean, segmentsWritten: number, products: number, manifest: string | null): BuildReport => ({
    built,
    manifest,
    version,
    full,
    segmentsWritten,
    products,
    ms: Date.now() - started,
  });
  if (pointer && pointer.version >= version) return report(false, false, 0, 0, pointer.manifest);

  const previous = pointer ? await readManifest(env.CATALOGUE, pointer.manifest) : null;
  const id = `${version}-${started.toString(36)}-${crypto.randomUUID().slice(0, 8)}`;
  const writer = new SegmentWriter(env.CATALOGUE, id, options);
  const names = new Map(competitorRows.map((row) => [row.id, row]));

  let changed =
    previous && previous.segments.length > 0 && resetVersion <= previous.version
      ? await changedSegments(db, previous.segments, previous.version)
      : null;
  if (changed && changed.size > previous!.segments.length * FULL_BUILD_SHARE) changed = null;
  let segments: Segment[];
  if (changed === null) segments = await fullBuild(db, names, writer);
  else {
    segments = [];
    for (const [i, segment] of previous!.segments.entries()) {
      if (!changed.has(i)) segments.push(segment);
      else segments.push(...(await rebuildSegment(db, names, writer, segment.first, previous!.segments[i + 1]?.first ?? null)));
    }
    if (segments[0]) segments[0] = { ...segments[0], first: "" };
  }

  const manifest: Manifest = {
    id,
    version,
    builtAt: new Date().toISOString(),
    products: segments.reduce((sum, segment) => sum + segment.count, 0),
    segments,
    competitors: competitorViews(competitorRows, segments),
    body: { json: concatenated(bodyParts(segments, "json")), ndjson: concatenated(bodyParts(segments, "ndjson")) },
  };
  await env.CATALOGUE.put(manifestKey(id), JSON.stringify(manifest));
  await env.CATALOGUE.put(POINTER_KEY, JSON.stringify({ manifest: id, version } satisfies Pointer));
  return report(true, changed === null, writer.written, manifest.products, id);
}
