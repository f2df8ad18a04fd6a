import { and, asc, gt, gte, inArray, lt, or, type SQL, sql } from "drizzle-orm";
import type { Database } from "../../platform/db.ts";
import { logger } from "../../platform/log.ts";
import { competitors, offers, products } from "../../platform/tables.ts";
import { type CompetitorRow, type OfferRow, type ProductRow, productView } from "../views.ts";
import type { BuildWork } from "./build-report.ts";
import { deflatePart } from "./gzip-member.ts";
import type { BuildDeps } from "./limits.ts";
import { type FilterRow, MAX_SUMMARY_VALUES, type Part, partCompetitors } from "./manifest.ts";

/**
 * Products read from D1 and encoded into parts: a part is a few products, each form (JSON, NDJSON)
 * compressed on its own as raw deflate ending in a sync flush, so parts old and new join into one
 * deflate stream (gzip-member.ts).
 */

export interface Encoded {
  id: string;
  json: string;
  sku: string;
  brand: string | null;
  category: string | null;
  updatedAt: string;
  competitorIds: string[];
}

/**
 * A part of a segment being written: its index entry and, when it is to be written (just encoded, or
 * copied by a compaction), each form's compressed bytes; without bytes it stays where its entry says.
 */
export type Piece = { part: Part; bytes?: undefined } | { part: UnplacedPart; bytes: { json: Uint8Array; ndjson: Uint8Array } };
/** A part's index entry before its bytes are placed in a step's objects. */
type UnplacedPart = Omit<Part, "json" | "ndjson"> & Record<"json" | "ndjson", Omit<Part["json"], "key" | "offset">>;

// ---- Reading products ------------------------------------------------------------------------------

/** The products of an id range, in id order, a page at most, and their offers: two statements. */
export function pageStatements(db: Database, page: number, from: string, inclusive: boolean, below: string | null) {
  const range = and(inclusive ? gte(products.id, from) : gt(products.id, from), below === null ? undefined : lt(products.id, below)) as SQL;
  const ids = db.select({ id: products.id }).from(products).where(range).orderBy(asc(products.id)).limit(page);
  return [
    db.select().from(products).where(range).orderBy(asc(products.id)).limit(page),
    db.select().from(offers).where(inArray(offers.productId, ids)).orderBy(asc(offers.productId), asc(offers.competitorId)),
  ] as const;
}

/**
 * Products changed after `version` within an id range (`range` builds its bounds on the id it is
 * given): through the (changed_version, id) index when few changes are pending, so rows read are the
 * changes, else through the id range, so rows read are the range's products. Given both, SQLite takes
 * the id range; a unary `+` keeps it off the index not wanted.
 */
export function changedInRange(version: number, range: (id: SQL) => (SQL | undefined)[], fewChanges: boolean): SQL {
  const id = fewChanges ? sql`+${products.id}` : sql`${products.id}`;
  const changedVersion = fewChanges ? sql`${products.changedVersion}` : sql`+${products.changedVersion}`;
  return and(sql`${changedVersion} > ${version}`, ...range(id)) as SQL;
}

const log = logger("catalogue-build");

export function encode(rows: readonly ProductRow[], offerRows: readonly OfferRow[], names: ReadonlyMap<string, CompetitorRow>): Encoded[] {
  const byProduct = new Map<string, OfferRow[]>();
  for (const row of offerRows) {
    let list = byProduct.get(row.productId);
    if (!list) byProduct.set(row.productId, (list = []));
    list.push(row);
  }
  const encoded: Encoded[] = [];
  for (const row of rows) {
    const own = byProduct.get(row.id) ?? [];
    let json: string;
    try {
      json = JSON.stringify(productView(row, own, names));
    } catch (error) {
      // One product's bad row (a total past 2^53-1 stored before ingestion refused it) must not stop every build:
      // it is left out of the snapshot, as if absent, until a change makes it whole again.
      log.error("product left out of the snapshot: its rows cannot be shown", { product_id: row.id, sku: row.sku, error: String(error) });
      continue;
    }
    encoded.push({
      id: row.id,
      json,
      sku: row.sku,
      brand: row.brand?.toLowerCase() ?? null,
      category: row.category?.toLowerCase() ?? null,
      updatedAt: row.updatedAt,
      competitorIds: own.map((offer) => offer.competitorId),
    });
  }
  return encoded;
}

export interface Range {
  first: string;
  below: string | null;
}

/** Id ranges per statement when several are read at once: two bound parameters each, well under D1's 100. */
export const RANGES_PER_STATEMENT = 24;

/**
 * Every product of several ranges (the changed parts of a step's segments), in one batch: per
 * RANGES_PER_STATEMENT ranges, one statement for the products and one for their offers. A part holds
 * a few dozen products, so no page limit is needed; reading only the changed parts is what keeps a
 * scattered change's D1 reads proportional to it.
 */
export async function readRanges(deps: BuildDeps, ranges: readonly Range[], names: ReadonlyMap<string, CompetitorRow>): Promise<Encoded[]> {
  const { db } = deps;
  if (ranges.length === 0) return [];
  const queries = [];
  for (let i = 0; i < ranges.length; i += RANGES_PER_STATEMENT) {
    const inRanges = or(
      ...ranges
        .slice(i, i + RANGES_PER_STATEMENT)
        .map((range) => and(gte(products.id, range.first), range.below === null ? undefined : lt(products.id, range.below))),
    );
    // Both through `id IN (…)`: with ORDER BY id beside the OR of ranges, SQLite scans the whole table
    // in id order rather than seek each range (91 ms against 1 ms at 100,000 products).
    const ids = db.select({ id: products.id }).from(products).where(inRanges);
    queries.push(
      db.select().from(products).where(inArray(products.id, ids)).orderBy(asc(products.id)),
      db.select().from(offers).where(inArray(offers.productId, ids)).orderBy(asc(offers.productId), asc(offers.competitorId)),
    );
  }
  const results = (await db.batch(queries as unknown as Parameters<typeof db.batch>[0])) as unknown as unknown[][];
  const items: Encoded[] = [];
  for (let k = 0; k < results.length; k += 2) items.push(...encode(results[k] as ProductRow[], results[k + 1] as OfferRow[], names));
  return items;
}

export async function competitorNames(deps: BuildDeps): Promise<Map<string, CompetitorRow>> {
  const rows = await deps.db.select().from(competitors).orderBy(asc(competitors.id));
  return new Map(rows.map((row) => [row.id, row]));
}

// ---- Parts and segments ------------------------------------------------------------------------------

export const valueSet = (values: Iterable<string | null>) => {
  const set = new Set<string>();
  for (const value of values) if (value !== null) set.add(value);
  return set.size > MAX_SUMMARY_VALUES ? null : [...set].sort();
};

/** Products as one part whose range starts at `first`. */
function encodePart(first: string, items: readonly Encoded[], work: BuildWork): Piece {
  const json = deflatePart(items.map((item) => item.json).join(","));
  const ndjson = deflatePart(items.map((item) => `${item.json}\n`).join(""));
  work.partsEncoded++;
  work.productsEncoded += items.length;
  const offerCounts: Record<string, number> = {};
  for (const item of items) for (const id of item.competitorIds) offerCounts[id] = (offerCounts[id] ?? 0) + 1;
  const brands = valueSet(items.map((item) => item.brand));
  const categories = valueSet(items.map((item) => item.category));
  const competitors = partCompetitors({ offers: offerCounts });
  // A part's sets are never cut to null: it holds at most twice partTarget products, fewer than MAX_SUMMARY_VALUES.
  if (!brands || !categories) throw new Error(`A part of ${items.length} products is over MAX_SUMMARY_VALUES`);
  const position = (list: readonly string[], value: string | null) => (value === null ? -1 : list.indexOf(value));
  const rows = items.map(
    (item): FilterRow => [
      position(brands, item.brand),
      position(categories, item.category),
      Date.parse(item.updatedAt),
      ...item.competitorIds.map((id) => competitors.indexOf(id)),
    ],
  );
  return {
    part: {
      first,
      count: items.length,
      json: { bytes: json.bytes.length, crc: json.crc, length: json.length },
      ndjson: { bytes: ndjson.bytes.length, crc: ndjson.crc, length: ndjson.length },
      maxUpdatedAt: items.reduce((max, item) => (item.updatedAt > max ? item.updatedAt : max), ""),
      brands,
      categories,
      offers: offerCounts,
      skus: items.map((item) => item.sku),
      ids: items.map((item) => item.id),
      rows,
    },
    bytes: { json: json.bytes, ndjson: ndjson.bytes },
  };
}

/** Products of a range starting at `first` as parts: one part up to twice partTarget, else parts of partTarget. */
export function encodeParts({ limits, work }: BuildDeps, first: string, items: readonly Encoded[]): Piece[] {
  const size = limits.partTarget;
  if (items.length === 0) return [];
  if (items.length <= 2 * size) return [encodePart(first, items, work)];
  const pieces: Piece[] = [];
  for (let start = 0; start < items.length; start += size)
    pieces.push(encodePart(start === 0 ? first : items[start]!.id, items.slice(start, start + size), work));
  return pieces;
}
