import { and, asc, eq, gt, inArray, isNotNull, isNull, lt, type SQL, sql } from "drizzle-orm";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { eventIdTime } from "../platform/ids.ts";
import { logger } from "../platform/log.ts";
import { parseNdjsonGz, putNdjsonGz } from "../platform/ndjson-archive.ts";
import { eventArchive, events, WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";
import {
  COMMIT_SKEW_MS,
  EVENT_ARCHIVE_DELETES_PER_RUN,
  EVENT_ARCHIVE_OBJECTS_PER_RUN,
  EVENTS_IN_D1_MS,
  EVENTS_PER_ARCHIVE_OBJECT,
  REPLAY_ARCHIVE_READS,
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

type ArchiveRange = typeof eventArchive.$inferSelect;
/** An event as the archive keeps it: what the feed and replay need, without the outbox's bookkeeping. */
export type ArchivedEvent = Pick<typeof events.$inferSelect, "seq" | "id" | "type" | "timestamp" | "payload" | "oldMinor" | "newMinor">;

const archivedColumns = {
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
/** ISO text `COMMIT_SKEW_MS` after a timestamp column's value, as SQLite computes it. */
const plusSkew = (value: SQL) => sql`strftime('%Y-%m-%dT%H:%M:%fZ', ${value}, ${`+${COMMIT_SKEW_MS / 1000} seconds`})`;

/**
 * As SQL, the lowest seq in D1 whose timestamp may be at or after `since` (9e18 when none): the events
 * of COMMIT_SKEW_MS from the first such timestamp, read through the timestamp index, hold it (an event
 * committed before another has a timestamp at most that much later).
 */
export function firstSeqSince(since: string): SQL {
  const first = sql`(SELECT min(timestamp) FROM events WHERE timestamp >= ${since})`;
  return sql`coalesce((SELECT min(seq) FROM events WHERE timestamp >= ${since} AND timestamp < ${plusSkew(first)}), 9e18)`;
}

/** Moves the events due for the archive, in bounded steps. Returns how many left D1. */
export async function archiveEvents(db: Database, bucket: R2Bucket, now = Date.now()): Promise<number> {
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

/** The events of one archive object, in seq order. */
async function readArchive(bucket: R2Bucket, range: ArchiveRange): Promise<ArchivedEvent[]> {
  const object = await bucket.get(archiveKey(range.firstSeq));
  if (!object) {
    logger("event-archive").error("archived events object missing", { key: archiveKey(range.firstSeq) });
    throw new ApiError(503, "Archived events are briefly unavailable; send the same request again.", { "Retry-After": "1" });
  }
  return parseNdjsonGz<ArchivedEvent>(object);
}

export interface EventScan {
  /** Events after this seq ... */
  afterSeq: number;
  /** ... whose timestamp is in [since, until) ... */
  since: string;
  /**
   * Whether to seek to `since` through the timestamp indexes (a client's since without a cursor) rather
   * than only filter by it (the retention's floor, or a cursor already past it): seeking costs a read of
   * COMMIT_SKEW_MS of the index.
   */
  seek: boolean;
  until?: string;
  types?: readonly string[];
  /** ... at most this many ... */
  want: number;
  /** ... reading at most this many archive objects. */
  archiveReads: number;
  /** An archive object already read (the cursor's). */
  cached?: { range: ArchiveRange; events: ArchivedEvent[] };
}

export interface ScanResult {
  events: ArchivedEvent[];
  /** The last event looked at when the scan stopped at its archive budget before `want` events: resume after it. */
  stoppedAt: ArchivedEvent | null;
}

/**
 * Events in commit order across the archive and D1, as if all were in D1. Every range read is an index
 * range: `after` bounds seq directly; `since` becomes a seq bound through the timestamp indexes, by
 * reading COMMIT_SKEW_MS of them from the first timestamp at or after `since` (an event committed
 * before another has a timestamp at most that much later). The index and D1's rows are read in one batch
 * (one transaction), so a step of the archiver cannot fall between them.
 */
export async function scanEvents(db: Database, bucket: R2Bucket, scan: EventScan): Promise<ScanResult> {
  const { afterSeq, since, until } = scan;
  // Only some types: one is an index range of (type, seq); every type is no filter at all.
  const types = scan.types && WEBHOOK_EVENT_TYPES.every((type) => scan.types!.includes(type)) ? undefined : scan.types;
  const firstArchivedMax = sql`(SELECT min(max_timestamp) FROM event_archive WHERE max_timestamp >= ${since})`;
  const sinceRange = scan.seek
    ? sql`coalesce((SELECT min(first_seq) FROM event_archive WHERE max_timestamp >= ${since} AND max_timestamp < ${plusSkew(firstArchivedMax)}), 9e18)`
    : sql`0`;
  const afterRange = sql`coalesce((SELECT max(first_seq) FROM event_archive WHERE first_seq <= ${afterSeq}), 0)`;
  const sinceSeq = scan.seek ? firstSeqSince(since) : sql`0`;
  const [ranges, recent] = await db.batch([
    db
      .select()
      .from(eventArchive)
      .where(
        and(
          sql`${eventArchive.firstSeq} >= max(${afterRange}, ${sinceRange})`,
          gt(eventArchive.lastSeq, afterSeq),
          sql`${eventArchive.maxTimestamp} >= ${since}`,
        ),
      )
      .orderBy(asc(eventArchive.firstSeq))
      .limit(scan.archiveReads + 1), // one more than it may read: whether any is left unread
    db
      .select(archivedColumns)
      .from(events)
      .where(
        and(
          sql`${events.seq} > max(${afterSeq}, ${archivedThrough}, ${sinceSeq} - 1)`,
          isNull(events.accountId), // account events are their account's alone
          sql`${events.timestamp} >= ${since}`,
          until === undefined ? undefined : lt(events.timestamp, until),
          types ? (types.length === 1 ? eq(events.type, types[0]!) : inArray(events.type, [...types])) : undefined,
        ),
      )
      .orderBy(asc(events.seq))
      .limit(scan.want),
  ]);
  const matches = (event: ArchivedEvent) =>
    event.seq > afterSeq &&
    event.timestamp >= since &&
    (until === undefined || event.timestamp < until) &&
    (!types || types.includes(event.type));
  const found: ArchivedEvent[] = [];
  let archived: ArchivedEvent[] = [];
  for (const range of ranges.slice(0, scan.archiveReads)) {
    archived = scan.cached?.range.firstSeq === range.firstSeq ? scan.cached.events : await readArchive(bucket, range);
    for (const event of archived) {
      if (!matches(event)) continue;
      found.push(event);
      if (found.length === scan.want) return { events: found, stoppedAt: null };
    }
  }
  // Objects are left unread: stop here, resumable after the last event looked at.
  if (ranges.length > scan.archiveReads) return { events: found, stoppedAt: archived.at(-1)! };
  return { events: [...found, ...recent].slice(0, scan.want), stoppedAt: null };
}

/**
 * Replay's archived events: those of [since, until) up to seq `through` (the high-water mark its D1 read
 * saw, so the two reads neither miss nor repeat an event), at most REPLAY_ARCHIVE_READS objects (then 400).
 * The range of objects is bounded both ways by the timestamp index, as in scanEvents.
 */
export async function archivedBetween(
  db: Database,
  bucket: R2Bucket,
  { since, until, through }: { since: string; until: string; through: number },
): Promise<ArchivedEvent[]> {
  const firstArchivedMax = sql`(SELECT min(max_timestamp) FROM event_archive WHERE max_timestamp >= ${since})`;
  const sinceRange = sql`coalesce((SELECT min(first_seq) FROM event_archive WHERE max_timestamp >= ${since} AND max_timestamp < ${plusSkew(firstArchivedMax)}), 9e18)`;
  const untilRange = sql`coalesce((SELECT last_seq FROM event_archive WHERE max_timestamp >= ${plusSkew(sql`${until}`)} ORDER BY max_timestamp LIMIT 1), 9e18)`;
  const ranges = await db
    .select()
    .from(eventArchive)
    .where(
      sql`${eventArchive.firstSeq} BETWEEN ${sinceRange} AND min(${untilRange}, ${through}) AND ${eventArchive.maxTimestamp} >= ${since} AND ${eventArchive.minTimestamp} < ${until}`,
    )
    .orderBy(asc(eventArchive.firstSeq))
    .limit(REPLAY_ARCHIVE_READS + 1);
  if (ranges.length > REPLAY_ARCHIVE_READS) {
    throw new ApiError(
      400,
      `Invalid body: until: the span holds more than ${(REPLAY_ARCHIVE_READS * EVENTS_PER_ARCHIVE_OBJECT).toLocaleString("en")} archived events; replay a shorter span (an earlier until), then the next.`,
    );
  }
  const found: ArchivedEvent[] = [];
  for (const range of ranges) {
    for (const event of await readArchive(bucket, range))
      if (event.seq <= through && event.timestamp >= since && event.timestamp < until) found.push(event);
  }
  return found;
}

/** The answer to a cursor naming an event older than the retention, or unknown (GET /events, GET /account/events). */
export const cursorGone = (id: string) =>
  new ApiError(
    410,
    `Event ${id} is older than 30 days or unknown: events are kept 30 days. Start again with since (an ISO-8601 time) instead of after.`,
  );

/**
 * The seq of the event a cursor names: from D1, or from the archive object its id's timestamp falls in.
 * An event older than the retention, or unknown, is 410.
 */
export async function cursorOf(
  db: Database,
  bucket: R2Bucket,
  { id, oldest, archiveReads }: { id: string; oldest: string; archiveReads: number },
) {
  const gone = () => cursorGone(id);
  const at = eventIdTime(id);
  const [inD1, candidates] = await db.batch([
    db.select({ seq: events.seq, timestamp: events.timestamp }).from(events).where(eq(events.id, id)),
    db
      .select()
      .from(eventArchive)
      .where(sql`${eventArchive.maxTimestamp} >= ${at} AND ${eventArchive.maxTimestamp} >= ${oldest}`)
      .orderBy(asc(eventArchive.maxTimestamp))
      .limit(archiveReads),
  ]);
  const row = inD1[0];
  if (row) {
    if (row.timestamp < oldest) throw gone();
    return { seq: row.seq };
  }
  if (at < oldest) throw gone();
  for (const range of candidates.filter((candidate) => candidate.minTimestamp <= at)) {
    const archived = await readArchive(bucket, range);
    const event = archived.find((candidate) => candidate.id === id);
    if (event) return { seq: event.seq, cached: { range, events: archived } };
  }
  throw gone();
}
