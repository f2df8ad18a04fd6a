import { and, lt, sql } from "drizzle-orm";
import { firstArchiveYear, mergeHistory, readHistoryYear } from "../catalogue/history-archive.ts";
import type { ProductView } from "../catalogue/schema.ts";
import { findManifest, readPointer } from "../catalogue/snapshot/manifest.ts";
import { extentLines } from "../catalogue/snapshot/read.ts";
import { scanEvents } from "../events/archive-read.ts";
import { RETENTION_MS } from "../events/retention.ts";
import type { FeedEvent } from "../events/schema.ts";
import type { Database } from "../platform/db.ts";
import { priceHistory, WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";
import { sandboxBase } from "../sandbox/catalogue.ts";
import { sandboxCatalogue, sandboxProductBody } from "../sandbox/reads.ts";
import type { AccountSandbox } from "../sandbox/stub.ts";
import type { Row } from "./files.ts";
import { CATALOGUE_COLUMNS, CHANGE_COLUMNS, catalogueRows, changeRow, historyChanges, type ProductFields } from "./rows.ts";

/**
 * One bounded step of an export: the rows of the next piece of its source, by day, and where the next step starts.
 * A step's work does not grow with the catalogue or the span: at most `segments` snapshot segments (about 5,000
 * products, a build step's size), or `events` events read through at most `archiveReads` archive objects and one D1
 * batch, plus one D1 statement for the products' brand and category. (Tests lower them to make many steps of little data.)
 */
export const STEP_LIMITS = {
  segments: 5,
  events: 5000,
  archiveReads: 5,
  /** Products whose archived history a step reads: each one R2 read per year it spans, and one D1 statement for them all. */
  historyProducts: 100,
};

type HistoryCursor = {
  phase: "history";
  manifest: string | null;
  segment: number;
  offset: number;
  since: string;
  floor: string;
  until: string;
};

/** Where an export is: the next step's start. */
export type Cursor =
  | { phase: "catalogue"; manifest: string | null; segment: number }
  /** Changes older than the feed holds (`floor`): derived from the products' price history, product by product. */
  | HistoryCursor
  /** The feed's events; `history`, the history before the feed's floor, read after them. */
  | { phase: "changes"; since: string; until: string; afterSeq: number; after: string | null; history?: HistoryCursor }
  | { phase: "done" };

export interface StepSource {
  environment: "live" | "test";
  db: Database;
  catalogue: R2Bucket;
  archive: R2Bucket;
  sandbox: AccountSandbox;
}

export interface StepResult {
  /** The step's rows by day (YYYY-MM-DD), each day's in order. */
  days: Map<string, Row[]>;
  next: Cursor;
}

export const columnsOf = (kind: "catalogue" | "changes") => (kind === "catalogue" ? CATALOGUE_COLUMNS : CHANGE_COLUMNS);

/** The first cursor of a catalogue export: the snapshot published now, pinned for every step (its objects outlive a replacement by a day). */
export async function catalogueStart(catalogue: R2Bucket): Promise<Cursor> {
  const pointer = await readPointer(catalogue);
  return { phase: "catalogue", manifest: pointer?.manifest ?? null, segment: 0 };
}

function byDay(rows: readonly Row[], dayOf: (row: Row) => string): Map<string, Row[]> {
  const days = new Map<string, Row[]>();
  for (const row of rows) {
    const day = dayOf(row);
    const own = days.get(day);
    if (own) own.push(row);
    else days.set(day, [row]);
  }
  return days;
}

/**
 * The first cursor of a live changes export: the span from the feed's floor (the oldest event it keeps, 30 days) from
 * the feed, first, while its oldest events are still kept (a long history phase would outlast them); then the span
 * before the floor from the price history. A test export reads its sandbox's feed alone (kept 7 days, no archive).
 */
export async function changesStart(
  catalogue: R2Bucket,
  span: { since: string; until: string },
  environment: "live" | "test",
): Promise<Cursor> {
  const floor = new Date(Date.now() - RETENTION_MS).toISOString();
  const feed = { phase: "changes" as const, since: span.since < floor ? floor : span.since, until: span.until, afterSeq: 0, after: null };
  if (environment === "test" || span.since >= floor) return feed;
  const pointer = await readPointer(catalogue);
  const history: HistoryCursor = {
    phase: "history",
    manifest: pointer?.manifest ?? null,
    segment: 0,
    offset: 0,
    since: span.since,
    floor,
    until: span.until,
  };
  return span.until <= floor ? history : { ...feed, history };
}

export async function runStep(source: StepSource, cursor: Cursor): Promise<StepResult> {
  if (cursor.phase === "done") return { days: new Map(), next: cursor };
  if (cursor.phase === "history") return historyStep(source, cursor);
  if (cursor.phase === "catalogue") return source.environment === "test" ? sandboxCatalogueStep(source) : catalogueStep(source, cursor);
  return source.environment === "test" ? sandboxChangesStep(source, cursor) : changesStep(source, cursor);
}

/** A snapshot's products, STEP_LIMITS.segments segments a step, read as GET /products streams them (the same bytes). */
async function catalogueStep(source: StepSource, cursor: Extract<Cursor, { phase: "catalogue" }>): Promise<StepResult> {
  const manifest = cursor.manifest === null ? null : await findManifest(source.catalogue, cursor.manifest);
  if (cursor.manifest !== null && !manifest)
    throw new Error(`The snapshot ${cursor.manifest} this export reads is gone; start the export again.`);
  if (!manifest) return { days: new Map(), next: { phase: "done" } };
  const day = manifest.builtAt.slice(0, 10);
  const segments = manifest.segments.slice(cursor.segment, cursor.segment + STEP_LIMITS.segments);
  const rows: Row[] = [];
  for (const segment of segments) {
    for await (const lines of extentLines(source.catalogue, segment.ndjson.extents)) {
      for (const line of lines) rows.push(...catalogueRows(JSON.parse(line) as ProductView));
    }
  }
  const segment = cursor.segment + segments.length;
  return {
    days: rows.length > 0 ? new Map([[day, rows]]) : new Map(),
    next: segment >= manifest.segments.length ? { phase: "done" } : { ...cursor, segment },
  };
}

/** The sandbox's catalogue (1,000 products and the account's changes) in one step, as a test key's GET /products serves it. */
async function sandboxCatalogueStep(source: StepSource): Promise<StepResult> {
  const catalogue = await sandboxCatalogue(source.sandbox);
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of sandboxProductBody(catalogue, { filters: {}, form: "ndjson" }, false))
    text += decoder.decode(chunk, { stream: true });
  const rows = text
    .split("\n")
    .filter((line) => line.length > 0)
    .flatMap((line) => catalogueRows(JSON.parse(line) as ProductView));
  return {
    days: rows.length > 0 ? new Map([[new Date(catalogue.base.hour).toISOString().slice(0, 10), rows]]) : new Map(),
    next: { phase: "done" },
  };
}

const CHANGE_TYPES = WEBHOOK_EVENT_TYPES as readonly string[];
const eventOf = (row: { id: string; payload: string }) => ({ id: row.id, ...JSON.parse(row.payload) }) as FeedEvent;

/** The live products' brand and category, by id: one statement, reading one row per product named. */
async function liveProductFields(db: Database, ids: readonly string[]): Promise<Map<string, ProductFields>> {
  if (ids.length === 0) return new Map();
  const rows = await db.all<{ id: string; brand: string | null; category: string | null }>(
    sql`SELECT id, brand, category FROM products WHERE id IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`,
  );
  return new Map(rows.map((row) => [row.id, { brand: row.brand, category: row.category }]));
}

/** Events of [since, until) in commit order, as GET /events pages them: D1 and the archive, STEP_LIMITS.events a step. */
async function changesStep(source: StepSource, cursor: Extract<Cursor, { phase: "changes" }>): Promise<StepResult> {
  const scan = await scanEvents(source.db, source.archive, {
    afterSeq: cursor.afterSeq,
    since: cursor.since,
    until: cursor.until,
    seek: cursor.afterSeq === 0,
    types: CHANGE_TYPES,
    want: STEP_LIMITS.events,
    archiveReads: STEP_LIMITS.archiveReads,
  });
  const events = scan.events.map(eventOf);
  const products = await liveProductFields(source.db, [...new Set(events.map((event) => event.data.product_id))]);
  const rows = events.map((event) => changeRow(event, products.get(event.data.product_id)));
  const last = scan.events.at(-1) ?? scan.stoppedAt;
  const more = scan.stoppedAt !== null || scan.events.length === STEP_LIMITS.events;
  return {
    days: byDay(rows, (row) => String(row.timestamp).slice(0, 10)),
    next: more && last ? { ...cursor, afterSeq: last.seq } : (cursor.history ?? { phase: "done" }),
  };
}

/**
 * Changes older than the feed, from the price history (GET /products/{id}/history serves the same rows): each history
 * row of an offer whose price (or currency) differs from the row before it is a price.changed, whose stock differs a
 * stock.changed, as the ingestion emitted them. Their id is derived from the row (the same in every export), their
 * timestamp is the observation's; what the history does not keep (shipping, totals, the 30-day low) is null.
 * STEP_LIMITS.historyProducts products a step, in the pinned snapshot's order.
 */
async function historyStep(source: StepSource, cursor: Extract<Cursor, { phase: "history" }>): Promise<StepResult> {
  const manifest = cursor.manifest === null ? null : await findManifest(source.catalogue, cursor.manifest);
  if (cursor.manifest !== null && !manifest)
    throw new Error(`The snapshot ${cursor.manifest} this export reads is gone; start the export again.`);
  const afterHistory: Cursor = { phase: "done" };
  const segment = manifest?.segments[cursor.segment];
  if (!manifest || !segment) return { days: new Map(), next: afterHistory };
  const lines: string[] = [];
  for await (const batch of extentLines(source.catalogue, segment.ndjson.extents)) lines.push(...batch);
  const products = lines.slice(cursor.offset, cursor.offset + STEP_LIMITS.historyProducts).map((line) => JSON.parse(line) as ProductView);
  const end = cursor.floor < cursor.until ? cursor.floor : cursor.until;
  const competitorNames = new Map(manifest.competitors.map((c) => [c.id, c.name]));
  const recent = await source.db
    .select()
    .from(priceHistory)
    .where(
      and(
        sql`${priceHistory.productId} IN (SELECT value FROM json_each(${JSON.stringify(products.map((p) => p.id))}))`,
        lt(priceHistory.observedAt, end),
      ),
    );
  const rows: Row[] = [];
  for (const product of products) {
    const years: string[] = [];
    for (let year = firstArchiveYear(product.created_at); year <= Number(end.slice(0, 4)); year++) years.push(String(year));
    const archived = (await Promise.all(years.map((year) => readHistoryYear(source.archive, product.id, year)))).flat();
    const own = recent.filter((row) => row.productId === product.id);
    const history = mergeHistory(archived, own).filter((row) => row.observedAt < end);
    rows.push(...(await historyChanges(product, history, { since: cursor.since, competitorNames })));
  }
  const offset = cursor.offset + products.length;
  const next: Cursor =
    offset < lines.length
      ? { ...cursor, offset }
      : cursor.segment + 1 < manifest.segments.length
        ? { ...cursor, segment: cursor.segment + 1, offset: 0 }
        : afterHistory;
  return { days: byDay(rows, (row) => String(row.timestamp).slice(0, 10)), next };
}

/** The account's sandbox events of [since, until) (kept 7 days), paged by id as its feed is. */
async function sandboxChangesStep(source: StepSource, cursor: Extract<Cursor, { phase: "changes" }>): Promise<StepResult> {
  const rows = await source.sandbox.events({
    ...(cursor.after === null ? { since: cursor.since } : { after: cursor.after, since: cursor.since }),
    until: cursor.until,
    types: CHANGE_TYPES,
    limit: STEP_LIMITS.events,
  });
  const base = sandboxBase();
  const fields = (id: string) => {
    const index = base.byId.get(id);
    const product = index === undefined ? undefined : base.products[index];
    return product ? { brand: product.brand, category: product.category } : undefined;
  };
  const changes = rows.map(eventOf).map((event) => changeRow(event, fields(event.data.product_id)));
  return {
    days: byDay(changes, (row) => String(row.timestamp).slice(0, 10)),
    next: rows.length === STEP_LIMITS.events ? { ...cursor, after: rows.at(-1)!.id } : { phase: "done" },
  };
}
