import type { FeedEvent } from "../events/schema.ts";
import type { Row } from "../exports/files.ts";
import { WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";

/**
 * What an export reads through the door (KeyData's export methods), one bounded step at a time: where it is (its
 * cursor, kept by its ExportRunner between steps) and what a step may read (src/exports/steps.ts STEP_LIMITS).
 */

/** How much one step reads, whatever the catalogue's size or the span's length. */
export interface ExportLimits {
  /** Snapshot segments of a live catalogue export (about 1,000 products each). */
  segments: number;
  /** Events of a changes export. */
  events: number;
  /** Archive objects those events are read through. */
  archiveReads: number;
  /** Products whose archived history a step reads: each one R2 read per year it spans, and one D1 statement for them all. */
  historyProducts: number;
}

export type HistoryCursor = {
  phase: "history";
  manifest: string | null;
  segment: number;
  offset: number;
  since: string;
  floor: string;
  until: string;
};

export type ChangesCursor = {
  phase: "changes";
  since: string;
  until: string;
  /** The last live event read (its commit order), 0 before the first. */
  afterSeq: number;
  /** The last sandbox event read (its id), null before the first. */
  after: string | null;
  /** The history before the feed's floor, read after the feed's events. */
  history?: HistoryCursor;
};

/** Where an export is: the next step's start. */
export type ExportCursor =
  /** A catalogue export's snapshot, pinned for every step (a sandbox's has none: its one step reads it all). */
  | { phase: "catalogue"; manifest: string | null; segment: number }
  /** Changes older than the feed holds (`floor`): derived from the products' price history, product by product. */
  | HistoryCursor
  /** The feed's events. */
  | ChangesCursor
  | { phase: "done" };

export interface ExportStep {
  /** The step's rows by day (YYYY-MM-DD), each day's in order. */
  days: Map<string, Row[]>;
  next: ExportCursor;
}

/** A changes export's feed phase over [since, until), from the feed's floor on (what it keeps). */
export function feedStart(span: { since: string; until: string }, floor: string): ChangesCursor {
  return { phase: "changes", since: span.since < floor ? floor : span.since, until: span.until, afterSeq: 0, after: null };
}

/** The event types a changes export holds. */
export const CHANGE_TYPES = WEBHOOK_EVENT_TYPES as readonly string[];

/** A kept event (its id and its stored body) as the feed serves it. */
export const eventOf = (row: { id: string; payload: string }) => ({ id: row.id, ...JSON.parse(row.payload) }) as FeedEvent;

/** Change rows by the day of their timestamp, each day's in the order given. */
export function changesByDay(rows: readonly Row[]): Map<string, Row[]> {
  const days = new Map<string, Row[]>();
  for (const row of rows) {
    const day = String(row.timestamp).slice(0, 10);
    const own = days.get(day);
    if (own) own.push(row);
    else days.set(day, [row]);
  }
  return days;
}
