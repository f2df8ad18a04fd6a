import { asc, inArray, isNotNull, isNull, lt, sql } from "drizzle-orm";
import { withCronLease } from "../platform/cron-lease.ts";
import type { Database } from "../platform/db.ts";
import { putNdjsonGz } from "../platform/ndjson-archive.ts";
import { eventArchive, events } from "../platform/tables.ts";
import {
  EVENT_ARCHIVE_DELETES_PER_RUN,
  EVENT_ARCHIVE_OBJECTS_PER_RUN,
  EVENTS_IN_D1_MS,
  EVENTS_PER_ARCHIVE_OBJECT,
  RETENTION_MS,
} from "./retention.ts";

/**
 * Events older than a day leave D1 for R2 (docs/scale.md): the cron writes them, EVENTS_PER_ARCHIVE_OBJECT
 * at a time in commit order, as one gzip NDJSON object per seq range, and records the range in
 * `event_archive`. The order of a step makes a crash anywhere harmless: the object is written first
 * (under a key named by its first seq, so a retry overwrites it), then ONE D1 batch records the range
 * and deletes its rows. Until that batch commits the rows are still in D1 and the range is not in the
 * index; after it, they are in R2 only. Rows not yet fanned out stay in D1 for the outbox (the feed
 * reads them from the archive like the rest).
 */

export type ArchiveRange = typeof eventArchive.$inferSelect;
/** An event as the archive keeps it: what the feed and replay need, without the outbox's bookkeeping. */
export type ArchivedEvent = Pick<typeof events.$inferSelect, "seq" | "id" | "type" | "timestamp" | "payload" | "oldMinor" | "newMinor">;

export const archivedColumns = {
  seq: events.seq,
  id: events.id,
  type: events.type,
  timestamp: events.timestamp,
  payload: events.payload,
  oldMinor: events.oldMinor,
  newMinor: events.newMinor,
};

export const archiveKey = (firstSeq: number) => `events/${String(firstSeq).padStart(16, "0")}.ndjson.gz`;

/** The archive's high-water mark, as SQL: the last seq in R2 (ranges are contiguous, so the newest range's end). */
export const archivedThrough = sql`coalesce((SELECT last_seq FROM event_archive ORDER BY first_seq DESC LIMIT 1), 0)`;

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Moves the events due for the archive, in bounded steps, holding the task's lease (none moved when another run holds
 * it). Returns how many left D1.
 */
export function archiveEvents(db: Database, bucket: R2Bucket, now = Date.now()): Promise<number> {
  return withCronLease(db, "events-archive", 0, () => moveEvents(db, bucket, now));
}

async function moveEvents(db: Database, bucket: R2Bucket, now: number): Promise<number> {
  const due = iso(now - EVENTS_IN_D1_MS);
  let moved = 0;
  for (let step = 0; step < EVENT_ARCHIVE_OBJECTS_PER_RUN; step++) {
    const rows = await db
      .select({ ...archivedColumns, createdAt: events.createdAt, accountId: events.accountId })
      .from(events)
      .where(sql`${events.seq} > ${archivedThrough}`)
      .orderBy(asc(events.seq))
      .limit(EVENTS_PER_ARCHIVE_OBJECT);
    const ready = rows.findIndex((row) => row.createdAt >= due);
    const range = ready === -1 ? rows : rows.slice(0, ready);
    if (range.length === 0) break;
    const first = range[0]!;
    const last = range.at(-1)!;
    // Account events (src/account-events/) stay in D1: they are their account's, read by its own route.
    const batch = range.filter((row) => row.accountId === null).map(({ createdAt: _, accountId: __, ...event }) => event);
    const timestamps = (batch.length > 0 ? batch : range).map((event) => event.timestamp).sort();
    await putNdjsonGz(bucket, archiveKey(first.seq), batch);
    await db.batch([
      db.insert(eventArchive).values({
        firstSeq: first.seq,
        lastSeq: last.seq,
        minTimestamp: timestamps[0]!,
        maxTimestamp: timestamps.at(-1)!,
        count: batch.length,
      }),
      db
        .delete(events)
        .where(
          sql`${events.seq} BETWEEN ${first.seq} AND ${last.seq} AND ${isNotNull(events.fannedOutAt)} AND ${isNull(events.accountId)}`,
        ),
    ]);
    moved += batch.length;
    if (range.length < rows.length || rows.length < EVENTS_PER_ARCHIVE_OBJECT) break;
  }
  return moved;
}

/** Deletes archive objects past the retention: the object first, then its range (a reader skips expired ranges either way). */
export async function expireArchive(db: Database, bucket: R2Bucket, now = Date.now()): Promise<number> {
  const expired = await db
    .select({ firstSeq: eventArchive.firstSeq })
    .from(eventArchive)
    .where(lt(eventArchive.maxTimestamp, iso(now - RETENTION_MS)))
    .orderBy(asc(eventArchive.maxTimestamp))
    .limit(EVENT_ARCHIVE_DELETES_PER_RUN);
  if (expired.length === 0) return 0;
  const seqs = expired.map((range) => range.firstSeq);
  await bucket.delete(seqs.map(archiveKey));
  await db.delete(eventArchive).where(inArray(eventArchive.firstSeq, seqs));
  return seqs.length;
}
