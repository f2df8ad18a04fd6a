import { and, asc, eq, gt, inArray, isNull, lt, type SQL, sql } from "drizzle-orm";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { logger } from "../platform/log.ts";
import { parseNdjsonGz } from "../platform/ndjson-archive.ts";
import { eventArchive, events, WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";
import { type ArchivedEvent, type ArchiveRange, archivedColumns, archivedThrough, archiveKey } from "./archive.ts";
import { COMMIT_SKEW_MS, EVENTS_PER_ARCHIVE_OBJECT, REPLAY_ARCHIVE_READS } from "./retention.ts";

/**
 * Reading the events archive (src/events/archive.ts writes it) together with D1, as if every event were still
 * in D1: the feed's pages and cursors (GET /events, GET /events/stream) and replay's span.
 */

/** ISO text `COMMIT_SKEW_MS` after a timestamp column's value, as SQLite computes it. */
const plusSkew = (value: SQL) => sql`strftime('%Y-%m-%dT%H:%M:%fZ', ${value}, ${`+${COMMIT_SKEW_MS / 1000} seconds`})`;

/**
 * As SQL, the lowest seq of a catalogue event in D1 whose timestamp may be at or after `since` (9e18 when none): the
 * catalogue's events of COMMIT_SKEW_MS from the first such timestamp, read through their own timestamp index (no
 * account's events in it), hold it (an event committed before another has a timestamp at most that much later).
 */
export function firstSeqSince(since: string): SQL {
  // Named: SQLite would otherwise walk events_account's catalogue range, all of it, for the account_id IS NULL.
  const catalogue = sql.raw("events INDEXED BY events_catalogue_timestamp");
  const first = sql`(SELECT min(timestamp) FROM ${catalogue} WHERE account_id IS NULL AND timestamp >= ${since})`;
  return sql`coalesce((SELECT min(seq) FROM ${catalogue} WHERE account_id IS NULL AND timestamp >= ${since} AND timestamp < ${plusSkew(first)}), 9e18)`;
}

/**
 * As firstSeqSince, for a feed that also holds one account's own events (a replay): the lower of the catalogue's start
 * and the account's, the latter read in the account's own range (events_account), never another account's.
 */
export function firstSeqSinceWithOwn(since: string, accountId: string): SQL {
  const own = sql`coalesce((SELECT min(seq) FROM events WHERE account_id = ${accountId} AND timestamp >= ${since}), 9e18)`;
  return sql`min(${firstSeqSince(since)}, ${own})`;
}

/** As SQL, the lowest first_seq of an archive object that may hold an event at or after `since` (9e18 when none), as firstSeqSince. */
export function archiveFirstSeqSince(since: string): SQL {
  const firstArchivedMax = sql`(SELECT min(max_timestamp) FROM event_archive WHERE max_timestamp >= ${since})`;
  return sql`coalesce((SELECT min(first_seq) FROM event_archive
    WHERE max_timestamp >= ${since} AND max_timestamp < ${plusSkew(firstArchivedMax)}), 9e18)`;
}

/** The events of one archive object, in seq order. */
export async function readArchive(bucket: R2Bucket, range: ArchiveRange): Promise<ArchivedEvent[]> {
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
  const sinceRange = scan.seek ? archiveFirstSeqSince(since) : sql`0`;
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
  const sinceRange = archiveFirstSeqSince(since);
  const untilRange = sql`coalesce((SELECT last_seq FROM event_archive
    WHERE max_timestamp >= ${plusSkew(sql`${until}`)} ORDER BY max_timestamp LIMIT 1), 9e18)`;
  const ranges = await db
    .select()
    .from(eventArchive)
    .where(
      sql`${eventArchive.firstSeq} BETWEEN ${sinceRange} AND min(${untilRange}, ${through})
        AND ${eventArchive.maxTimestamp} >= ${since} AND ${eventArchive.minTimestamp} < ${until}`,
    )
    .orderBy(asc(eventArchive.firstSeq))
    .limit(REPLAY_ARCHIVE_READS + 1);
  if (ranges.length > REPLAY_ARCHIVE_READS) {
    throw new ApiError(
      400,
      `Invalid body: until: the span holds more than ` +
        `${(REPLAY_ARCHIVE_READS * EVENTS_PER_ARCHIVE_OBJECT).toLocaleString("en")} archived events; replay a shorter ` +
        `span (an earlier until), then the next.`,
    );
  }
  const found: ArchivedEvent[] = [];
  for (const range of ranges) {
    for (const event of await readArchive(bucket, range))
      if (event.seq <= through && event.timestamp >= since && event.timestamp < until) found.push(event);
  }
  return found;
}
