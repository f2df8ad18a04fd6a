import { desc, eq, sql } from "drizzle-orm";
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
 * GET /events/stream: the feed as server-sent events. A stream opened with a cursor (`after`,
 * Last-Event-ID) or `since` first backfills, read through GET /events' own service (`listEvents`: its
 * cursor, its 410, wherever it keeps older events), examining at most BACKFILL_EXAMINED_MAX events; one
 * opened with neither starts at the present. Then live: the stream polls D1 every POLL_MS for catalogue
 * events committed after the last one it examined (one query a poll, so 60 D1 queries a minute per open
 * stream while nothing happens; a poll that finds events a rule needs history for adds at most two). Each
 * event that passes the query's rules (src/alerts/rules.ts, the webhooks' decision) is sent as `id`,
 * `event`, `data`, once the key's object says the key still admits the stream (src/api-keys/object/stub.ts,
 * `keyStillAdmits`), which it also asks at every heartbeat. The server ends a stream after LIFETIME_MS (one
 * invocation's work stays bounded: at most LIFETIME_MS / POLL_MS polls, far below D1's 1,000 queries an
 * invocation); EventSource clients reconnect on their own with Last-Event-ID.
 */

export const POLL_MS = 1000;
export const HEARTBEAT_MS = 15_000;
export const LIFETIME_MS = 5 * 60_000;
export const MAX_STREAMS_PER_KEY = 5;
/** Over all of an account's keys: so an account's streams cost a bounded share of D1 however many keys it makes. */
export const MAX_STREAMS_PER_ACCOUNT = 25;
/** Events one connection's backfill examines at most (matching or not): then it hands the client a cursor and ends. */
export const BACKFILL_EXAMINED_MAX = 10_000;
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

/** A refused stream's Retry-After: a hint, since a slot frees when a client closes a stream (or at the latest when one ends). */
const SLOT_RETRY_SECONDS = 10;

/** A stream's slot: its row lives until the stream ends, or (if the invocation died) until its lease expires. */
const LEASE_GRACE_MS = 60_000;

/**
 * Takes one of the key's MAX_STREAMS_PER_KEY slots, within the account's MAX_STREAMS_PER_ACCOUNT, or answers 429
 * naming the cap. One D1 batch (two statements); a refusal reads the key's count once more, to name its cap.
 */
export async function openSlot(db: Database, key: { id: string; accountId: string }, lifetimeMs: number): Promise<string> {
  const id = newId("str");
  // the (counting) binding drizzle wraps; drizzle cannot batch a raw statement
  const d1 = (db as Database & { $client: D1Database }).$client;
  const [, taken] = await d1.batch([
    d1.prepare("DELETE FROM event_streams WHERE account_id = ? AND expires_at <= ?").bind(key.accountId, new Date().toISOString()),
    d1
      .prepare(
        `INSERT INTO event_streams (id, key_id, account_id, expires_at) SELECT ?1, ?2, ?3, ?4
          WHERE (SELECT count(*) FROM event_streams WHERE key_id = ?2) < ?5
            AND (SELECT count(*) FROM event_streams WHERE account_id = ?3) < ?6`,
      )
      .bind(
        id,
        key.id,
        key.accountId,
        new Date(Date.now() + lifetimeMs + LEASE_GRACE_MS).toISOString(),
        MAX_STREAMS_PER_KEY,
        MAX_STREAMS_PER_ACCOUNT,
      ),
  ]);
  if (taken!.meta.changes === 1) return id;
  const detail =
    (await db.$count(eventStreams, eq(eventStreams.keyId, key.id))) >= MAX_STREAMS_PER_KEY
      ? `This API key already has ${MAX_STREAMS_PER_KEY} event streams open; close one (or use another key) before opening another.`
      : `This account already has ${MAX_STREAMS_PER_ACCOUNT} event streams open over its API keys; close one before opening another.`;
  throw new ApiError(429, detail, { "Retry-After": String(SLOT_RETRY_SECONDS) });
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
/** A frame with an id and no data: the client's Last-Event-ID moves past events examined but not sent, and nothing is dispatched. */
const cursorFrame = (id: string) => `id: ${id}\n\n`;
const KEY_GONE = ": this API key no longer admits this stream; the stream ends\n\n";

/** The id of the latest event committed, catalogue or account (a cursor only, never sent): where a stream with no cursor starts. */
async function presentEventId(db: Database): Promise<string | undefined> {
  const [latest] = await db.select({ id: events.id }).from(events).orderBy(desc(events.seq)).limit(1);
  return latest?.id;
}

/** Waits `ms`, or less if the stream is closed meanwhile. */
function pause(ms: number, closed: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      closed.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    closed.addEventListener("abort", done);
  });
}

/**
 * The stream's text, frame by frame. Reads the first backfill page (or, with no cursor and no `since`, where the
 * present is) before returning, so a bad cursor is the caller's 410 rather than a broken stream. `stillAdmitted`
 * asks whether the key still admits the stream: before each write of events, and at each heartbeat. `closed`
 * (the client went away) stops the polling at once rather than at the next frame. `onEnd` runs once, however it ends.
 */
export async function eventFrames(
  { db, archive }: Pick<RequestServices, "db" | "archive">,
  {
    request,
    timing,
    stillAdmitted,
    closed,
    onEnd,
  }: { request: StreamRequest; timing: StreamTiming; stillAdmitted: () => Promise<boolean>; closed: AbortSignal; onEnd: () => void },
): Promise<AsyncGenerator<string>> {
  const feedQuery = {
    after: request.after,
    since: request.since,
    type: request.rule.types ? [...request.rule.types] : undefined,
    limit: BACKFILL_PAGE,
  } as Parameters<typeof listEvents>[2];
  const backfills = request.after !== undefined || request.since !== undefined;
  const first = backfills ? await listEvents(db, archive, feedQuery) : undefined;
  /** The last event examined (sent or not): where the stream goes on from, and where its client resumes. */
  let lastId = backfills ? request.after : await presentEventId(db);
  const since = request.since ?? new Date(Date.now() - RETENTION_MS).toISOString();

  async function* run(): AsyncGenerator<string> {
    const started = Date.now();
    let lastWrite = started;
    /** Whether the key still admits the stream; when it does not, the stream's last frame says so (the stream ends). */
    async function* keyAdmits(): AsyncGenerator<string, boolean> {
      if (await stillAdmitted()) return true;
      yield KEY_GONE;
      return false;
    }
    /** Sends the page's events that pass the rule, if the key still admits the stream; false when it does not. */
    async function* send(page: readonly FeedEvent[]): AsyncGenerator<string, boolean> {
      const wanted = await matchAlerts({ db, archive }, { events: page.map(alertEventOfFeed), rules: [request.rule] });
      if (wanted.length === 0) return true;
      if (!(yield* keyAdmits())) return false;
      lastWrite = Date.now();
      yield wanted.map(({ event }) => frame(event.feed)).join("");
      return true;
    }
    try {
      yield `retry: ${RECONNECT_MS}\n: connected\n\n`;
      for (let page = first, examined = 0; page; ) {
        examined += page.events.length;
        // A page cut short by its archive budget may hold no event, but its cursor is the last one looked at.
        lastId = page.next_cursor ?? page.events.at(-1)?.id ?? lastId;
        if (!(yield* send(page.events))) return;
        if (page.next_cursor === null) break;
        if (examined >= BACKFILL_EXAMINED_MAX || Date.now() - started >= timing.lifetimeMs) {
          yield cursorFrame(page.next_cursor);
          return;
        }
        page = await listEvents(db, archive, {
          ...feedQuery,
          after: page.next_cursor,
          limit: Math.min(BACKFILL_PAGE, BACKFILL_EXAMINED_MAX - examined),
        });
      }
      while (!closed.aborted && Date.now() - started < timing.lifetimeMs) {
        const rows = await db
          .select({ id: events.id, payload: events.payload })
          .from(events)
          .where(
            // Catalogue events only: account events are their account's alone (contract: "Account events stay home").
            sql`${events.seq} > coalesce((SELECT seq FROM ${events} WHERE id = ${lastId ?? ""}), 0)
              AND ${events.accountId} IS NULL AND ${events.timestamp} >= ${since}`,
          )
          .orderBy(events.seq)
          .limit(LIVE_PAGE);
        if (rows.length > 0) {
          lastId = rows.at(-1)!.id;
          const page = rows.map((row) => ({ id: row.id, ...(JSON.parse(row.payload) as Omit<FeedEvent, "id">) }) as FeedEvent);
          if (!(yield* send(page))) return;
          if (rows.length === LIVE_PAGE) continue; // more waiting: no pause
        }
        if (Date.now() - lastWrite >= timing.heartbeatMs - timing.pollMs) {
          if (!(yield* keyAdmits())) return;
          lastWrite = Date.now();
          yield ": keep-alive\n\n";
        }
        await pause(timing.pollMs, closed);
      }
      // The last event examined, so a client whose rules matched nothing resumes past it rather than at the present.
      yield `: the server ends this stream; reconnect with Last-Event-ID\n\n${lastId === undefined ? "" : cursorFrame(lastId)}`;
    } finally {
      onEnd();
    }
  }
  return run();
}

/**
 * The frames as a response body; a client that goes away cancels it, which runs `onCancel` (even if the frames never
 * started: it must close them and release what they hold) and then waits for the frames to end.
 */
export function frameStream(frames: AsyncGenerator<string>, onCancel: () => void): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { value, done } = await frames.next();
      if (done) controller.close();
      else controller.enqueue(encoder.encode(value));
    },
    async cancel() {
      onCancel();
      await frames.return(undefined);
    },
  });
}
