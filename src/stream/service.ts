import { eq, sql } from "drizzle-orm";
import { type AlertEvent, matchAlerts } from "../alerts/match.ts";
import type { AlertRule } from "../alerts/rules.ts";
import { RETENTION_MS } from "../events/retention.ts";
import type { FeedEvent } from "../events/schema.ts";
import { listEvents } from "../events/service.ts";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { parseMoney } from "../platform/money.ts";
import { eventStreams, events } from "../platform/tables.ts";

/**
 * GET /events/stream: the feed as server-sent events. First the backfill, read through GET /events'
 * own service (`listEvents`: its cursor, its 410, wherever it keeps older events), then live: the
 * stream polls D1 every POLL_MS for events committed after the last one it read (one query a poll,
 * so 60 D1 queries a minute per open stream while nothing happens; a poll that finds events a rule
 * needs history for adds at most two). Each event that passes the query's rules (src/alerts/rules.ts,
 * the webhooks' decision) is sent as `id`, `event`, `data`. The server ends a stream after
 * LIFETIME_MS (one invocation's work stays bounded: at most LIFETIME_MS / POLL_MS polls, far below
 * D1's 1,000 queries an invocation); EventSource clients reconnect on their own with Last-Event-ID.
 */

export const POLL_MS = 1000;
export const HEARTBEAT_MS = 15_000;
export const LIFETIME_MS = 5 * 60_000;
export const MAX_STREAMS_PER_KEY = 5;
/** The `retry:` the stream announces: how soon a client reconnects after the stream ends (ms). */
const RECONNECT_MS = 1000;
const BACKFILL_PAGE = 500;
const LIVE_PAGE = 200;

export interface StreamTiming {
  pollMs: number;
  heartbeatMs: number;
  lifetimeMs: number;
}
export const DEFAULT_TIMING: StreamTiming = { pollMs: POLL_MS, heartbeatMs: HEARTBEAT_MS, lifetimeMs: LIFETIME_MS };

export interface StreamRequest {
  after: string | undefined;
  since: string | undefined;
  rule: AlertRule;
}

/** A 6th stream's Retry-After: a hint, since the slot frees when a client closes a stream (or at the latest when one ends). */
const SLOT_RETRY_SECONDS = 10;

/** A stream's slot: its row lives until the stream ends, or (if the invocation died) until its lease expires. */
const LEASE_GRACE_MS = 60_000;

/** Takes one of the key's MAX_STREAMS_PER_KEY slots, or answers 429. One D1 batch (two statements). */
export async function openSlot(db: Database, keyId: string, lifetimeMs: number): Promise<string> {
  const id = newId("str");
  // the (counting) binding drizzle wraps; drizzle cannot batch a raw statement
  const d1 = (db as Database & { $client: D1Database }).$client;
  const [, taken] = await d1.batch([
    d1.prepare("DELETE FROM event_streams WHERE key_id = ? AND expires_at <= ?").bind(keyId, new Date().toISOString()),
    d1
      .prepare(
        "INSERT INTO event_streams (id, key_id, expires_at) SELECT ?, ?, ? WHERE (SELECT count(*) FROM event_streams WHERE key_id = ?) < ?",
      )
      .bind(id, keyId, new Date(Date.now() + lifetimeMs + LEASE_GRACE_MS).toISOString(), keyId, MAX_STREAMS_PER_KEY),
  ]);
  if (taken!.meta.changes !== 1) {
    throw new ApiError(
      429,
      `This API key already has ${MAX_STREAMS_PER_KEY} event streams open; close one (or use another key) before opening another.`,
      {
        "Retry-After": String(SLOT_RETRY_SECONDS),
      },
    );
  }
  return id;
}

export async function closeSlot(db: Database, slot: string): Promise<void> {
  await db.delete(eventStreams).where(eq(eventStreams.id, slot));
}

/**
 * A feed event as the rules read it (the price change in minor units comes from its own prices), holding the
 * feed event itself: the stream sends that, exactly as GET /events gives it, not the rules' view.
 */
function alertEventOfFeed(event: FeedEvent): AlertEvent & { feed: FeedEvent } {
  if (event.type !== "price.changed") return { ...event, data: event.data, feed: event };
  const { old_price: before, new_price: after, currency } = event.data;
  return {
    ...event,
    data: event.data,
    change: before === null ? null : { old_minor: parseMoney(before, currency), new_minor: parseMoney(after, currency) },
    feed: event,
  };
}

const frame = (event: FeedEvent) => `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;

/**
 * The stream's text, frame by frame. Reads the first backfill page before returning, so a bad
 * cursor is the caller's 410 rather than a broken stream. `onEnd` runs once, however it ends.
 */
export async function eventFrames(
  { db, archive }: Pick<RequestServices, "db" | "archive">,
  { request, timing, onEnd }: { request: StreamRequest; timing: StreamTiming; onEnd: () => Promise<void> },
): Promise<AsyncGenerator<string>> {
  const feedQuery = {
    after: request.after,
    since: request.since,
    type: request.rule.types ? [...request.rule.types] : undefined,
    limit: BACKFILL_PAGE,
  } as Parameters<typeof listEvents>[2];
  const first = await listEvents(db, archive, feedQuery);
  const since = request.since ?? new Date(Date.now() - RETENTION_MS).toISOString();

  async function* run(): AsyncGenerator<string> {
    const started = Date.now();
    let lastWrite = started;
    let lastId = request.after;
    const send = async (page: readonly FeedEvent[]) => {
      const wanted = await matchAlerts({ db, archive }, { events: page.map(alertEventOfFeed), rules: [request.rule] });
      return wanted.map(({ event }) => frame(event.feed)).join("");
    };
    try {
      yield `retry: ${RECONNECT_MS}\n: connected\n\n`;
      for (let page = first; ; ) {
        if (page.events.length > 0) lastId = page.events.at(-1)!.id;
        const text = await send(page.events);
        if (text) {
          lastWrite = Date.now();
          yield text;
        }
        if (page.next_cursor === null || Date.now() - started >= timing.lifetimeMs) break;
        page = await listEvents(db, archive, { ...feedQuery, after: page.next_cursor });
      }
      while (Date.now() - started < timing.lifetimeMs) {
        const rows = await db
          .select({ id: events.id, payload: events.payload })
          .from(events)
          .where(
            sql`${events.seq} > coalesce((SELECT seq FROM ${events} WHERE id = ${lastId ?? ""}), 0) AND ${events.timestamp} >= ${since}`,
          )
          .orderBy(events.seq)
          .limit(LIVE_PAGE);
        if (rows.length > 0) {
          lastId = rows.at(-1)!.id;
          const text = await send(rows.map((row) => ({ id: row.id, ...(JSON.parse(row.payload) as Omit<FeedEvent, "id">) }) as FeedEvent));
          if (text) {
            lastWrite = Date.now();
            yield text;
          }
          if (rows.length === LIVE_PAGE) continue; // more waiting: no pause
        }
        if (Date.now() - lastWrite >= timing.heartbeatMs - timing.pollMs) {
          lastWrite = Date.now();
          yield ": keep-alive\n\n";
        }
        await new Promise((resolve) => setTimeout(resolve, timing.pollMs));
      }
      yield ": the server ends this stream; reconnect with Last-Event-ID\n\n";
    } finally {
      await onEnd();
    }
  }
  return run();
}

/**
 * The frames as a response body; a client that goes away cancels it (ending the frames, and running `onEnd` even if
 * they never started).
 */
export function frameStream(frames: AsyncGenerator<string>, onEnd: () => Promise<void>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { value, done } = await frames.next();
      if (done) controller.close();
      else controller.enqueue(encoder.encode(value));
    },
    async cancel() {
      await frames.return(undefined);
      await onEnd();
    },
  });
}
