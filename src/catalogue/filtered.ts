import { and, asc, eq, gte, lte, type SQLWrapper, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { catalogueState, offers, products } from "../platform/tables.ts";
import type { ProductFilters } from "./schema.ts";
import { changedInRange } from "./snapshot/encode.ts";
import { type Manifest, type Segment, segmentIndexOf } from "./snapshot/manifest.ts";
import { productLines } from "./snapshot/read.ts";
import { type OfferRow, type ProductRow, productView } from "./views.ts";

/**
 * Filtered reads of GET /products (docs/catalogue.md, "Filtered reads"): a cost that follows the result.
 *
 * The body is exactly the snapshot's products that match, in id order, whichever way it is read, so
 * its ETag (the snapshot's id and the filter set) holds for every path:
 *
 * - **D1 pages** when the filter matches few products: the matching ids come from an index (one
 *   statement, at most `limit + 1` rows read), then a page of PAGE products and their offers at a
 *   time in one batch, rendered with the builder's productView and the snapshot's competitor names.
 *   D1 can be a moment ahead of the snapshot: a product changed since the snapshot's version
 *   (`changed_version` above it) is left out of D1's page and taken from its segment instead, found in
 *   the same batch, so the page is what the snapshot holds.
 * - **The snapshot's segments** when it matches a large share (more than SCAN_SHARE of the catalogue,
 *   or more than the D1 query budget pages): every segment whose summaries allow a match is decompressed
 *   and tested line by line. Reading the whole catalogue costs then at most 1 / SCAN_SHARE times the result.
 */

/** The filters as they are compared: brand and category lowercased (as JavaScript does), updated_since in ms. */
export interface FilterSet {
  sku?: string;
  competitor?: string;
  brand?: string;
  category?: string;
  since?: number;
}

export function filterSet(filters: ProductFilters): FilterSet {
  return {
    ...(filters.sku !== undefined && { sku: filters.sku }),
    ...(filters.competitor !== undefined && { competitor: filters.competitor }),
    ...(filters.brand !== undefined && { brand: filters.brand.toLowerCase() }),
    ...(filters.category !== undefined && { category: filters.category.toLowerCase() }),
    ...(filters.updated_since !== undefined && { since: Date.parse(filters.updated_since) }),
  };
}

/** Products per D1 page: one batch reads their rows, their offers and the products changed since the snapshot near them. */
const PAGE = 1000;
/** D1 statements a filtered response may make, of the 1,000 a Worker invocation gets (the rest: authentication, limits). */
const QUERY_BUDGET = 600;
/** Statements of the first batch (state, changed ids, at most four filters' ids) and of each page. */
const PLAN_STATEMENTS = 6;
const PAGE_STATEMENTS = 3;
/** A filter matching more than this share of the catalogue is read from the segments (measured: docs/catalogue.md). */
const SCAN_SHARE = 0.2;
/** Products changed since the snapshot that a page takes from their segments; beyond it, the rest is a scan. */
const CHANGED_CAP = 1000;

export interface FilteredReadOptions {
  /** Tests: the most matches served from D1 (default: SCAN_SHARE of the catalogue, within the query budget). */
  d1Limit?: number;
}

/** How many matches D1 serves before a scan is cheaper; at least one page, at most what the query budget pays for. */
function d1Limit(manifest: Manifest, options: FilteredReadOptions = {}): number {
  const budget = Math.floor((QUERY_BUDGET - PLAN_STATEMENTS) / PAGE_STATEMENTS) * PAGE;
  return options.d1Limit ?? Math.min(budget, Math.max(PAGE, Math.floor(SCAN_SHARE * manifest.products)));
}

// ---- Matching --------------------------------------------------------------------------------------

const STRING = /"(?:[^"\\]|\\.)*"/y;

/**
 * A top-level field of a product's JSON text without parsing the whole: its key's first occurrence is
 * the field itself, as the keys before it hold strings (whose quotes are escaped) and offers come later.
 */
function fieldOf(line: string, key: string): string | null {
  const start = line.indexOf(`"${key}":`) + key.length + 3;
  if (line.startsWith("null", start)) return null;
  STRING.lastIndex = start;
  const literal = STRING.exec(line)?.[0] ?? '""';
  return literal.includes("\\") ? (JSON.parse(literal) as string) : literal.slice(1, -1);
}

/** Whether a product (its JSON text from the snapshot) passes the filters. */
function lineMatcher(f: FilterSet): (line: string) => boolean {
  const offerKey = f.competitor === undefined ? undefined : `"competitor_id":${JSON.stringify(f.competitor)},`;
  return (line) =>
    (offerKey === undefined || line.includes(offerKey)) &&
    (f.sku === undefined || fieldOf(line, "sku") === f.sku) &&
    (f.brand === undefined || fieldOf(line, "brand")?.toLowerCase() === f.brand) &&
    (f.category === undefined || fieldOf(line, "category")?.toLowerCase() === f.category) &&
    (f.since === undefined || Date.parse(fieldOf(line, "updated_at")!) >= f.since);
}

/** Whether a product (its D1 row and offers) passes the filters: the same rules as lineMatcher. */
export function rowMatcher(f: FilterSet): (row: ProductRow, offerRows: readonly OfferRow[]) => boolean {
  return (row, offerRows) =>
    (f.competitor === undefined || offerRows.some((offer) => offer.competitorId === f.competitor)) &&
    (f.sku === undefined || row.sku === f.sku) &&
    (f.brand === undefined || row.brand?.toLowerCase() === f.brand) &&
    (f.category === undefined || row.category?.toLowerCase() === f.category) &&
    (f.since === undefined || Date.parse(row.updatedAt) >= f.since);
}

/** Whether a segment may hold a match, by its summaries. */
function segmentMayMatch(f: FilterSet): (segment: Segment) => boolean {
  return (segment) =>
    (f.competitor === undefined || f.competitor in segment.offers) &&
    (f.brand === undefined || segment.brands === null || segment.brands.includes(f.brand)) &&
    (f.category === undefined || segment.categories === null || segment.categories.includes(f.category)) &&
    (f.since === undefined || Date.parse(segment.maxUpdatedAt) >= f.since);
}

const ID = /^\{"id":("(?:[^"\\]|\\.)*")/;
const lineId = (line: string) => JSON.parse(ID.exec(line)![1]!) as string;

// ---- Case-insensitive values in an index ---------------------------------------------------------

/** Variants of a filter value beyond this many: the filter is not read from its index. */
const MAX_SPELLINGS = 16;
let upperCases: Map<string, string[]> | undefined;

/** For each lowercase character of the Basic Multilingual Plane, the other characters JavaScript lowercases to it. */
function otherCases(): Map<string, string[]> {
  if (upperCases) return upperCases;
  upperCases = new Map();
  for (let code = 0x80; code <= 0xffff; code++) {
    if (code >= 0xd800 && code <= 0xdfff) continue;
    const ch = String.fromCharCode(code);
    const lower = ch.toLowerCase();
    if (lower !== ch && lower.length === 1) upperCases.set(lower, [...(upperCases.get(lower) ?? []), ch]);
  }
  return upperCases;
}

/**
 * What SQLite's lower() (ASCII letters only) can make of the values JavaScript lowercases to `value`:
 * each non-ASCII letter in either case, and the characters outside ASCII that lowercase to an ASCII
 * one (the Kelvin sign). Null beyond MAX_SPELLINGS. The rows are checked again in JavaScript.
 */
export function sqliteSpellings(value: string): string[] | null {
  let spellings = [""];
  for (const ch of value) {
    const options = new Set([ch, ...(otherCases().get(ch) ?? [])]);
    const upper = ch.toUpperCase();
    if (ch > "\x7f" && [...upper].length === 1 && upper > "\x7f") options.add(upper);
    spellings = spellings.flatMap((prefix) => [...options].map((option) => prefix + option));
    if (spellings.length > MAX_SPELLINGS) return null;
  }
  return spellings;
}

// ---- D1 ------------------------------------------------------------------------------------------

const inList = (values: readonly string[]) =>
  sql.join(
    values.map((value) => sql`${value}`),
    sql`, `,
  );

/**
 * Each filter's matching product ids from its index, at most `limit + 1` (so "more than limit" is
 * known, never more rows read); null for a filter that cannot be read this way (too many spellings).
 */
export function idQueries(db: Database, f: FilterSet, limit: number) {
  const ids = () => db.select({ id: products.id }).from(products);
  const byValue = (column: SQLWrapper, value: string | undefined) => {
    if (value === undefined) return undefined;
    const spellings = sqliteSpellings(value);
    return (
      spellings &&
      ids()
        .where(sql`lower(${column}) in (${inList(spellings)})`)
        .limit(limit + 1)
    );
  };
  if (f.sku !== undefined)
    return {
      sku: ids()
        .where(eq(products.sku, f.sku))
        .limit(limit + 1),
    };
  return {
    brand: byValue(products.brand, f.brand),
    category: byValue(products.category, f.category),
    competitor:
      f.competitor === undefined
        ? undefined
        : db
            .select({ id: offers.productId })
            .from(offers)
            .where(eq(offers.competitorId, f.competitor))
            .limit(limit + 1),
    since:
      f.since === undefined
        ? undefined
        : ids()
            .where(gte(products.updatedAt, new Date(f.since).toISOString()))
            .limit(limit + 1),
  };
}

/**
 * Ids of products changed since the snapshot's version, above `after` and up to `upTo` (null: no end).
 * `fewChanges`: at most CHANGED_CAP were pending when the read began, so the changed-version index
 * reads about them rather than every product of a page's id range (changedInRange).
 */
export const changedQuery = (db: Database, version: number, after: string, upTo: string | null, fewChanges: boolean) =>
  db
    .select({ id: products.id })
    .from(products)
    .where(changedInRange(version, (id) => [sql`${id} > ${after}`, upTo === null ? undefined : sql`${id} <= ${upTo}`], fewChanges))
    .limit(CHANGED_CAP + 1);

const inJson = (column: SQLWrapper, ids: string) => sql`${column} in (select value from json_each(${ids}))`;

/** A page: the products (unchanged since the snapshot) and the offers of the given ids, in id order. */
export function pageQueries(db: Database, ids: readonly string[], version: number) {
  const list = JSON.stringify(ids);
  return [
    db
      .select()
      .from(products)
      .where(and(inJson(products.id, list), lte(products.changedVersion, version)))
      .orderBy(asc(products.id)),
    db.select().from(offers).where(inJson(offers.productId, list)).orderBy(asc(offers.productId), asc(offers.competitorId)),
  ] as const;
}

/** Where a filtered read looks, as its first batch decides: "scan" the segments, or the ids to read from D1 and the
 * products changed since the snapshot. */
async function chooseSource(
  db: Database,
  manifest: Manifest,
  f: FilterSet,
  limit: number,
): Promise<"scan" | { ids: string[]; changed: string[] }> {
  const queries = Object.entries(idQueries(db, f, limit)).filter(
    (entry): entry is [string, NonNullable<(typeof entry)[1]>] => entry[1] !== undefined && entry[1] !== null,
  );
  if (queries.length === 0) return "scan";
  const [state, changed, ...sets] = await db.batch([
    db.select({ resetVersion: catalogueState.resetVersion }).from(catalogueState).where(eq(catalogueState.id, 1)),
    changedQuery(db, manifest.version, "", null, true),
    ...queries.map(([, query]) => query),
  ]);
  // After a reset (the seed replaced the catalogue) D1 no longer says what the snapshot holds.
  if ((state[0]?.resetVersion ?? 0) > manifest.version) return "scan";
  const complete = sets.map((rows) => rows.map((row) => row.id)).filter((ids) => ids.length <= limit);
  if (complete.length === 0) return "scan";
  complete.sort((a, b) => a.length - b.length);
  const others = complete.slice(1).map((ids) => new Set(ids));
  const ids = complete[0]!.filter((id) => others.every((set) => set.has(id))).sort();
  return { ids, changed: changed.map((row) => row.id) };
}

// ---- Reading ------------------------------------------------------------------------------------

interface Hit {
  id: string;
  json: string;
}

/** The snapshot's lines of the given products (sorted ids) that match. */
async function snapshotHits(
  bucket: R2Bucket,
  manifest: Manifest,
  ids: readonly string[],
  matches: (line: string) => boolean,
  mayMatch: (segment: Segment) => boolean,
): Promise<Hit[]> {
  const wanted = new Set(ids);
  const indexes = [...new Set(ids.map((id) => segmentIndexOf(manifest.segments, id)))];
  const segments = indexes.map((i) => manifest.segments[i]!).filter(mayMatch);
  const hits: Hit[] = [];
  if (segments.length === 0) return hits;
  for await (const lines of productLines(bucket, segments)) {
    for (const line of lines) {
      const id = lineId(line);
      if (wanted.has(id) && matches(line)) hits.push({ id, json: line });
    }
  }
  return hits;
}

/** Matching products of the segments from the one holding `after` on, above `after` ("" for all). */
async function* scan(bucket: R2Bucket, manifest: Manifest, f: FilterSet, after: string): AsyncGenerator<string[]> {
  if (manifest.segments.length === 0) return;
  const matches = lineMatcher(f);
  const segments = manifest.segments.slice(after === "" ? 0 : segmentIndexOf(manifest.segments, after)).filter(segmentMayMatch(f));
  let past = after === "";
  for await (const lines of productLines(bucket, segments)) {
    if (!past) {
      const firstAbove = lines.findIndex((line) => lineId(line) > after);
      if (firstAbove < 0) continue;
      past = true;
      lines.splice(0, firstAbove);
    }
    const hits = lines.filter(matches);
    if (hits.length > 0) yield hits;
  }
}

function merge(a: readonly Hit[], b: readonly Hit[]): string[] {
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) out.push(j >= b.length || (i < a.length && a[i]!.id < b[j]!.id) ? a[i++]!.json : b[j++]!.json);
  return out;
}

/**
 * The snapshot's products that match, in id order, a few at a time: from D1 pages or the segments,
 * as described at the top of this file.
 */
export async function* matchingProducts(
  db: Database,
  bucket: R2Bucket,
  manifest: Manifest,
  f: FilterSet,
  options: FilteredReadOptions = {},
): AsyncGenerator<string[]> {
  const source = await chooseSource(db, manifest, f, d1Limit(manifest, options));
  if (source === "scan") return yield* scan(bucket, manifest, f, "");
  const names = new Map(manifest.competitors.map((competitor) => [competitor.id, competitor]));
  const matchesRow = rowMatcher(f);
  const matchesLine = lineMatcher(f);
  const mayMatch = segmentMayMatch(f);
  const { ids } = source;
  let changed = source.changed;
  const fewChanges = changed.length <= CHANGED_CAP;
  let after = "";
  for (let start = 0; start === 0 || start < ids.length; start += PAGE) {
    const chunk = ids.slice(start, start + PAGE);
    const upTo = start + PAGE < ids.length ? chunk[chunk.length - 1]! : null;
    let fromD1: Hit[] = [];
    if (chunk.length > 0) {
      const [rows, offerRows, changedRows] = await db.batch([
        ...pageQueries(db, chunk, manifest.version),
        changedQuery(db, manifest.version, after, upTo, fewChanges),
      ]);
      changed = changedRows.map((row) => row.id);
      const byProduct = new Map<string, OfferRow[]>();
      for (const offer of offerRows) byProduct.set(offer.productId, [...(byProduct.get(offer.productId) ?? []), offer]);
      fromD1 = rows.flatMap((row) => {
        const own = byProduct.get(row.id) ?? [];
        return matchesRow(row, own) ? [{ id: row.id, json: JSON.stringify(productView(row, own, names)) }] : [];
      });
    }
    // Changed since the snapshot (or more changes pending than a page reads from their segments: a scan from here).
    if (changed.length > CHANGED_CAP) return yield* scan(bucket, manifest, f, after);
    const fromSnapshot = changed.length === 0 ? [] : await snapshotHits(bucket, manifest, changed.sort(), matchesLine, mayMatch);
    const lines = merge(fromD1, fromSnapshot);
    if (lines.length > 0) yield lines;
    if (upTo === null) return;
    after = upTo;
  }
}
