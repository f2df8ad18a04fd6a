import { and, asc, eq, gte, inArray, sql } from "drizzle-orm";
import type { z } from "zod";
import { cursorGone } from "../events/cursor.ts";
import { DEFAULT_FEED_LIMIT, type feedQuery } from "../events/query.ts";
import { RETENTION_MS } from "../events/retention.ts";
import type { Database } from "../platform/db.ts";
import { type ACCOUNT_EVENT_TYPES, events } from "../platform/tables.ts";
import type { AccountEventFeed, AccountFeedEvent } from "./schema.ts";

export type AccountEventsQuery = z.output<ReturnType<typeof feedQuery<typeof ACCOUNT_EVENT_TYPES>>>;

/**
 * GET /account/events: the account's own events of the retention, in commit order, paged like GET /events.
 * They never leave D1 (the archiver keeps them), so a page is one read of the (account_id, seq) index (events_account,
 * whose condition is spelled out so SQLite can use it); with a cursor, the cursor's check rides in the same batch (one
 * round trip). The cursor is looked for among the account's own events only: another account's event id is as
 * unknown here as a made-up one (410).
 */
export async function listAccountEvents(db: Database, accountId: string, query: AccountEventsQuery): Promise<AccountEventFeed> {
  const oldest = new Date(Date.now() - RETENTION_MS).toISOString();
  const since = query.since !== undefined && query.since > oldest ? query.since : oldest;
  const limit = query.limit ?? DEFAULT_FEED_LIMIT;
  const own = and(eq(events.accountId, accountId), sql`${events.accountId} IS NOT NULL`);
  const cursor = query.after === undefined ? undefined : and(own, eq(events.id, query.after), gte(events.timestamp, oldest));
  const page = db
    .select({ id: events.id, payload: events.payload })
    .from(events)
    .where(
      and(
        own,
        cursor && sql`${events.seq} > (SELECT seq FROM ${events} WHERE ${cursor})`,
        gte(events.timestamp, since),
        query.type ? inArray(events.type, [...query.type]) : undefined,
      ),
    )
    .orderBy(asc(events.seq))
    .limit(limit + 1);
  const [rows, found] = cursor
    ? await db.batch([page, db.select({ seq: events.seq }).from(events).where(cursor)])
    : [await page, undefined];
  if (found?.length === 0) throw cursorGone(query.after!);
  const feed = rows.slice(0, limit).map((row) => ({ id: row.id, ...JSON.parse(row.payload) }) as AccountFeedEvent);
  return { events: feed, next_cursor: rows.length > limit ? rows[limit - 1]!.id : null };
}
