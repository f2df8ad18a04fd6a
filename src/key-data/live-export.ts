import { and, lt, sql } from "drizzle-orm";
import { firstArchiveYear, mergeHistory, readHistoryYear } from "../catalogue/history-archive.ts";
import type { ProductView } from "../catalogue/schema.ts";
import { findManifest, readPointer } from "../catalogue/snapshot/manifest.ts";
import { extentLines } from "../catalogue/snapshot/read.ts";
import { scanEvents } from "../events/archive-read.ts";
import { RETENTION_MS } from "../events/retention.ts";
import type { Row } from "../exports/files.ts";
import type { RequestServices } from "../http/app-env.ts";
import type { Database } from "../platform/db.ts";
import { priceHistory } from "../platform/tables.ts";
import { catalogueRows, changeRow, historyChanges, type ProductFields } from "./export-rows.ts";
import {
  CHANGE_TYPES,
  type ChangesCursor,
  changesByDay,
  type ExportCursor,
  type ExportLimits,
  type ExportStep,
  eventOf,
  feedStart,
  type HistoryCursor,
} from "./export-step.ts";

/**
 * A live export's reads (liveData's export methods): the catalogue's snapshot, pinned and read a few segments a step;
 * the feed's events from D1 and the archive; and, before the feed's floor, the changes the price history holds.
 */

type ExportServices = Pick<RequestServices, "db" | "catalogue" | "archive">;

/** A catalogue export's first cursor: the snapshot published now, pinned for every step (its objects outlive a replacement by a day). */
export async function catalogueExportStart(services: ExportServices): Promise<ExportCursor> {
  const pointer = await readPointer(services.catalogue.bucket);
  return { phase: "catalogue", manifest: pointer?.manifest ?? null, segment: 0 };
}

/**
 * A changes export's first cursor: the span from the feed's floor (the oldest event it keeps, 30 days) from the feed,
 * first, while its oldest events are still kept (a long history phase would outlast them); then the span before the
 * floor from the price history.
 */
export async function changesExportStart(services: ExportServices, span: { since: string; until: string }): Promise<ExportCursor> {
  const floor = new Date(Date.now() - RETENTION_MS).toISOString();
  const feed = feedStart(span, floor);
  if (span.since >= floor) return feed;
  const pointer = await readPointer(services.catalogue.bucket);
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

/** The pinned snapshot; an error the export reports when it is gone. */
async function pinnedManifest(services: ExportServices, id: string | null) {
  const manifest = id === null ? null : await findManifest(services.catalogue.bucket, id);
  if (id !== null && !manifest) throw new Error(`The snapshot ${id} this export reads is gone; start the export again.`);
  return manifest;
}

/** A snapshot's products, `limits.segments` segments a step, read as GET /products streams them (the same bytes). */
export async function catalogueExportStep(
  services: ExportServices,
  cursor: Extract<ExportCursor, { phase: "catalogue" }>,
  limits: ExportLimits,
): Promise<ExportStep> {
  const manifest = await pinnedManifest(services, cursor.manifest);
  if (!manifest) return { days: new Map(), next: { phase: "done" } };
  const day = manifest.builtAt.slice(0, 10);
  const segments = manifest.segments.slice(cursor.segment, cursor.segment + limits.segments);
  const rows: Row[] = [];
  for (const segment of segments) {
    for await (const lines of extentLines(services.catalogue.bucket, segment.ndjson.extents)) {
      for (const line of lines) rows.push(...catalogueRows(JSON.parse(line) as ProductView));
    }
  }
  const segment = cursor.segment + segments.length;
  return {
    days: rows.length > 0 ? new Map([[day, rows]]) : new Map(),
    next: segment >= manifest.segments.length ? { phase: "done" } : { ...cursor, segment },
  };
}

/** A step of a changes export: the feed's events, or the history before its floor. */
export const changesExportStep = (services: ExportServices, cursor: ChangesCursor | HistoryCursor, limits: ExportLimits) =>
  cursor.phase === "history" ? historyStep(services, cursor, limits) : feedStep(services, cursor, limits);

/** The live products' brand and category, by id: one statement, reading one row per product named. */
async function liveProductFields(db: Database, ids: readonly string[]): Promise<Map<string, ProductFields>> {
  if (ids.length === 0) return new Map();
  const rows = await db.all<{ id: string; brand: string | null; category: string | null }>(
    sql`SELECT id, brand, category FROM products WHERE id IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`,
  );
  return new Map(rows.map((row) => [row.id, { brand: row.brand, category: row.category }]));
}

/** Events of [since, until) in commit order, as GET /events pages them: D1 and the archive, `limits.events` a step. */
async function feedStep(services: ExportServices, cursor: ChangesCursor, limits: ExportLimits): Promise<ExportStep> {
  const scan = await scanEvents(services.db, services.archive, {
    afterSeq: cursor.afterSeq,
    since: cursor.since,
    until: cursor.until,
    seek: cursor.afterSeq === 0,
    types: CHANGE_TYPES,
    want: limits.events,
    archiveReads: limits.archiveReads,
  });
  const events = scan.events.map(eventOf);
  const products = await liveProductFields(services.db, [...new Set(events.map((event) => event.data.product_id))]);
  const rows = events.map((event) => changeRow(event, products.get(event.data.product_id)));
  const last = scan.events.at(-1) ?? scan.stoppedAt;
  const more = scan.stoppedAt !== null || scan.events.length === limits.events;
  return {
    days: changesByDay(rows),
    next: more && last ? { ...cursor, afterSeq: last.seq } : (cursor.history ?? { phase: "done" }),
  };
}

/**
 * Changes older than the feed, from the price history (GET /products/{id}/history serves the same rows): each history
 * row of an offer whose price (or currency) differs from the row before it is a price.changed, whose stock differs a
 * stock.changed, as the ingestion emitted them. Their id is derived from the row (the same in every export), their
 * timestamp is the observation's; what the history does not keep (shipping, totals, the 30-day low) is null.
 * `limits.historyProducts` products a step, in the pinned snapshot's order.
 */
async function historyStep(services: ExportServices, cursor: HistoryCursor, limits: ExportLimits): Promise<ExportStep> {
  const manifest = await pinnedManifest(services, cursor.manifest);
  const afterHistory: ExportCursor = { phase: "done" };
  const segment = manifest?.segments[cursor.segment];
  if (!manifest || !segment) return { days: new Map(), next: afterHistory };
  const lines: string[] = [];
  for await (const batch of extentLines(services.catalogue.bucket, segment.ndjson.extents)) lines.push(...batch);
  const products = lines.slice(cursor.offset, cursor.offset + limits.historyProducts).map((line) => JSON.parse(line) as ProductView);
  const end = cursor.floor < cursor.until ? cursor.floor : cursor.until;
  const competitorNames = new Map(manifest.competitors.map((c) => [c.id, c.name]));
  const recent = await services.db
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
    const archived = (await Promise.all(years.map((year) => readHistoryYear(services.archive, product.id, year)))).flat();
    const own = recent.filter((row) => row.productId === product.id);
    const history = mergeHistory(archived, own).filter((row) => row.observedAt < end);
    rows.push(...(await historyChanges(product, history, { since: cursor.since, competitorNames })));
  }
  const offset = cursor.offset + products.length;
  const next: ExportCursor =
    offset < lines.length
      ? { ...cursor, offset }
      : cursor.segment + 1 < manifest.segments.length
        ? { ...cursor, segment: cursor.segment + 1, offset: 0 }
        : afterHistory;
  return { days: changesByDay(rows), next };
}
