import { and, asc, eq, gt, gte, inArray, isNull } from "drizzle-orm";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { events } from "../platform/tables.ts";
import { RETENTION_MS } from "./outbox.ts";
import { DEFAULT_FEED_LIMIT, type EventsQuery } from "./query.ts";
import type { EventFeed, FeedEvent } from "./schema.ts";

/**
 * The events feed. Every API key sees every catalogue event (the catalogue is shared by all accounts);
 * `webhook.test` events belong to one webhook and are not in it. Ordered by commit (`seq`), so a
 * client that pages with `after` never misses an event committed later with an earlier timestamp.
 */
export async function listEvents(db: Database, query: EventsQuery): Promise<EventFeed> {
  const oldest = new Date(Date.now() - RETENTION_MS).toISOString();
  let afterSeq = 0;
  if (query.after !== undefined) {
    const cursor = await db.select({ seq: events.seq, timestamp: events.timestamp }).from(events).where(eq(events.id, query.after)).get();
    if (!cursor || cursor.timestamp < oldest) {
      throw new ApiError(410, `Event ${query.after} is older than 30 days or unknown: events are kept 30 days. Start again with since (an ISO-8601 time) instead of after.`);
    }
    afterSeq = cursor.seq;
  }
  const since = query.since !== undefined && query.since > oldest ? query.since : oldest;
  const limit = query.limit ?? DEFAULT_FEED_LIMIT;
  const rows = await db
    .select({ id: events.id, payload: events.payload })
    .from(events)
    // Account events (src/account-events/) are their account's alone.
    .where(and(isNull(events.accountId), gt(events.seq, afterSeq), gte(events.timestamp, since), query.type ? inArray(events.type, query.type) : undefined))
    .orderBy(asc(events.seq))
    .limit(limit + 1);
  const page = rows.slice(0, limit).map((row) => ({ id: row.id, ...(JSON.parse(row.payload) as Omit<FeedEvent, "id">) }) as FeedEvent);
  return { events: page, next_cursor: rows.length > limit ? page.at(-1)!.id : null };
}
