import { desc, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { events, WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";
import type { ArchivedEvent } from "./archive.ts";
import { scanEvents } from "./archive-read.ts";
import { cursorOf } from "./cursor.ts";
import { scanEventsNewestFirst } from "./newest-first.ts";
import { DEFAULT_FEED_LIMIT, type EventsQuery } from "./query.ts";
import { EVENT_ARCHIVE_READS_PER_PAGE, RETENTION_MS } from "./retention.ts";
import type { EventFeed, FeedEvent } from "./schema.ts";

/**
 * The events feed. Every API key sees every catalogue event (the catalogue is shared by all accounts);
 * `webhook.test` events belong to one webhook and are not in it. Ordered by commit (`seq`), so a
 * client that pages with `after` never misses an event committed later with an earlier timestamp.
 * The last day is in D1, the rest of the 30 days in R2 (src/events/archive.ts); a page reads both alike.
 */
export async function listEvents(db: Database, bucket: R2Bucket, query: EventsQuery): Promise<EventFeed> {
  const { cursor, since, limit } = await pageStart(db, bucket, query);
  const scan = await scanEvents(db, bucket, {
    afterSeq: cursor?.seq ?? 0,
    since,
    // A client's since is sought through the index; the retention's floor, or since beside a cursor, only filters.
    seek: query.since !== undefined && cursor === undefined,
    types: query.type,
    want: limit + 1,
    archiveReads: EVENT_ARCHIVE_READS_PER_PAGE,
    cached: cursor?.cached,
  });
  return feedPage(scan, limit);
}

/**
 * The same events newest first (MCP's recent_changes): `after` names the last event of the previous page, and the
 * page holds the events committed before it, down to `since`.
 */
export async function listEventsNewestFirst(db: Database, bucket: R2Bucket, query: EventsQuery): Promise<EventFeed> {
  const { cursor, since, limit } = await pageStart(db, bucket, query);
  const scan = await scanEventsNewestFirst(db, bucket, {
    beforeSeq: cursor?.seq,
    since,
    types: query.type,
    want: limit + 1,
    archiveReads: EVENT_ARCHIVE_READS_PER_PAGE,
    cached: cursor?.cached,
  });
  return feedPage(scan, limit);
}

/** Where a page starts: the cursor's event (410 when gone), `since` no earlier than the retention, the page's size. */
async function pageStart(db: Database, bucket: R2Bucket, query: EventsQuery) {
  const oldest = new Date(Date.now() - RETENTION_MS).toISOString();
  const cursor =
    query.after === undefined
      ? undefined
      : await cursorOf(db, bucket, { id: query.after, oldest, archiveReads: EVENT_ARCHIVE_READS_PER_PAGE });
  const since = query.since !== undefined && query.since > oldest ? query.since : oldest;
  return { cursor, since, limit: query.limit ?? DEFAULT_FEED_LIMIT };
}

/** A page of at most `limit` of the events scanned (one more than `limit` says there are more). */
function feedPage({ events, stoppedAt }: { events: ArchivedEvent[]; stoppedAt: ArchivedEvent | null }, limit: number): EventFeed {
  const page = events.slice(0, limit).map((row) => ({ id: row.id, ...(JSON.parse(row.payload) as Omit<FeedEvent, "id">) }) as FeedEvent);
  // A page cut short by its archive budget still has a cursor: the last event it looked at.
  return { events: page, next_cursor: events.length > limit ? page.at(-1)!.id : (stoppedAt?.id ?? null) };
}

/**
 * The catalogue feed's newest event (a stream's present when it opens without a cursor): the newer of its two types'
 * newest, each sought through the (type, seq) index, so other accounts' events (account events have types of their
 * own) are not read on the way.
 */
export async function newestCatalogueEventId(db: Database): Promise<string | undefined> {
  const catalogueNewest = (type: string) =>
    sql`(SELECT seq FROM ${events} WHERE type = ${type} AND account_id IS NULL ORDER BY seq DESC LIMIT 1)`;
  const [latest] = await db
    .select({ id: events.id })
    .from(events)
    .where(sql`${events.seq} IN (${sql.join(WEBHOOK_EVENT_TYPES.map(catalogueNewest), sql`, `)})`)
    .orderBy(desc(events.seq))
    .limit(1);
  return latest?.id;
}
