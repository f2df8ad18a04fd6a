import { eq } from "drizzle-orm";
import { type AlertEvent, matchAlerts } from "../alerts/match.ts";
import type { AlertRule } from "../alerts/rules.ts";
import type { ApiKeyOfRequest } from "../api-keys/object/types.ts";
import type { EventsQuery } from "../events/query.ts";
import type { FeedEvent } from "../events/schema.ts";
import { ApiError } from "../http/errors.ts";
import type { KeyData } from "../key-data/door.ts";
import type { Database } from "../platform/db.ts";
import type { WorkCounts, WorkMeter } from "../platform/metered.ts";
import { parseMoney } from "../platform/money.ts";
import { apiKeys } from "../platform/tables.ts";
import type { StreamHub } from "./hub.ts";
import { LIFETIME_MS, MAX_STREAMS_PER_ACCOUNT, MAX_STREAMS_PER_KEY } from "./limits.ts";
import {
  type CapReached,
  eventFrame,
  type HubMessage,
  KEEPALIVE,
  KEY_GONE_CLOSE,
  OBJECT_WORK_HEADER,
  SUBSCRIPTION_HEADER,
  type Subscription,
} from "./protocol.ts";

/**
 * GET /events/stream: the feed as server-sent events, pushed. The worker serving a stream first opens a WebSocket to
 * its account's hub (src/stream/hub.ts), which registers the stream's rule, or refuses it when the key or the
 * account holds all its streams (429). Then, from D1, a stream opened with a cursor (`after`, Last-Event-ID) or
 * `since` backfills, read through GET /events' own service (`listEvents`: its cursor, its 410, wherever it keeps
 * older events), examining at most BACKFILL_EXAMINED_MAX events; one opened with neither starts at the present.
 * Then live: what the hub pushes (each ingestion's commit publishes its events to the hubs, which run the rules and
 * send each stream its matches), no D1 query while nothing happens; an event this connection sent already is dropped.
 * The worker writes a comment every HEARTBEAT_MS. The stream ends: when its key stops admitting it (the key's object
 * pushes the change to the hub, which closes the socket; an expiry the worker knows ends it at that instant), when
 * the hub's socket closes (a hub restart: the client resumes with Last-Event-ID and catches up from D1), and after
 * LIFETIME_MS, handing the client the last event examined as its cursor.
 */

export const HEARTBEAT_MS = 15_000;
/** Events one connection's backfill examines at most (matching or not): then it hands the client a cursor and ends. */
export const BACKFILL_EXAMINED_MAX = 10_000;
/**
 * How often the worker pings its hub's socket (at a heartbeat): often enough that the socket never sits idle for
 * minutes, rarely enough that the pings (incoming messages, billed 20 to 1 as requests even when the runtime answers
 * them without waking the hub) cost a quarter of what a ping every heartbeat would.
 */
const SOCKET_PING_MS = 60_000;
/** The `retry:` the stream announces: how soon a client reconnects after the stream ends (ms). */
const RECONNECT_MS = 1000;
const BACKFILL_PAGE = 500;

export interface StreamTiming {
  heartbeatMs: number;
  lifetimeMs: number;
}
export const DEFAULT_TIMING: StreamTiming = { heartbeatMs: HEARTBEAT_MS, lifetimeMs: LIFETIME_MS };

export interface StreamRequest {
  after: string | undefined;
  since: string | undefined;
  rule: AlertRule;
}

/** A refused stream's Retry-After: a hint, since a slot frees when a client closes a stream (or at the latest when one ends). */
const SLOT_RETRY_SECONDS = 10;

const CAP_DETAIL: Record<CapReached["cap"], string> = {
  key: `This API key already has ${MAX_STREAMS_PER_KEY} event streams open; close one (or use another key) before opening another.`,
  account: `This account already has ${MAX_STREAMS_PER_ACCOUNT} event streams open over its API keys; close one before opening another.`,
};

/**
 * Registers the stream with its account's hub: the socket the hub pushes to, accepted; or 429 naming the cap the key
 * or the account reached. The socket's close is the stream's release: nothing is stored for a stream.
 */
export async function subscribe(hub: DurableObjectStub<StreamHub>, subscription: Subscription, work: WorkMeter): Promise<WebSocket> {
  const connect = hub.fetch("https://stream-hub/subscribe", {
    headers: { Upgrade: "websocket", [SUBSCRIPTION_HEADER]: encodeURIComponent(JSON.stringify(subscription)) },
  });
  const { res } = await work.called(connect.then((res) => ({ res, work: JSON.parse(res.headers.get(OBJECT_WORK_HEADER)!) as WorkCounts })));
  if (res.status === 429) {
    const { cap } = await res.json<CapReached>();
    throw new ApiError(429, CAP_DETAIL[cap], { "Retry-After": String(SLOT_RETRY_SECONDS) });
  }
  if (!res.webSocket) throw new Error(`the stream's hub answered ${res.status} to a connect`);
  res.webSocket.accept();
  return res.webSocket;
}

/**
 * A feed event as the rules read it (the price change in minor units comes from its own prices), holding the
 * feed event itself: the stream sends that, exactly as GET /events gives it, not the rules' view.
 */
export function alertEventOfFeed(event: FeedEvent): AlertEvent & { feed: FeedEvent } {
  if (event.type !== "price.changed") return { ...event, data: event.data, feed: event };
  const { old_price: before, new_price: after, currency } = event.data;
  return {
    ...event,
    data: event.data,
    change: before === null ? null : { old_minor: parseMoney(before, currency), new_minor: parseMoney(after, currency) },
    feed: event,
  };
}

/** A frame with an id and no data: the client's Last-Event-ID moves past events examined but not sent, and nothing is dispatched. */
const cursorFrame = (id: string) => `id: ${id}\n\n`;
const KEY_GONE = ": this API key no longer admits this stream; the stream ends\n\n";

/**
 * What a stream reads when it opens: the key's expiry (the instant the stream must end by, unless its key's object pushes
 * an earlier one) and, for a stream with no cursor, where the present is: the latest event of its own feed (a cursor
 * only, never sent), which it hands its client if it ends having sent nothing. The present is an event the stream's feed
 * holds, never another account's: a live stream's is the catalogue's latest, a test stream's its own sandbox's.
 */
async function openingReads(
  db: Database,
  key: StreamKey,
  data: KeyData,
): Promise<{ expiresAt: number | null; present: string | undefined }> {
  const [[row], present] = await Promise.all([
    db.select({ expiresAt: apiKeys.expiresAt }).from(apiKeys).where(eq(apiKeys.id, key.id)),
    data.newestEventId(),
  ]);
  return { expiresAt: row?.expiresAt ? Date.parse(row.expiresAt) : null, present };
}

/** The key a stream serves: its id (its expiry), its account and its environment (which data). */
export type StreamKey = Pick<ApiKeyOfRequest, "id" | "accountId" | "environment">;

type Arrival = HubMessage | { kind: "closed"; code: number };

/**
 * What the hub's socket brings, queued from the moment the stream subscribed (pushes during the backfill wait their
 * turn). `next` waits at most `ms` (less if `closed` aborts) and returns the next arrival, or undefined for none.
 */
function inboxOf(socket: WebSocket, closed: AbortSignal) {
  const queue: Arrival[] = [];
  let wake: (() => void) | undefined;
  const arrive = (arrival: Arrival) => {
    queue.push(arrival);
    wake?.();
  };
  socket.addEventListener("message", (message) => {
    if (message.data !== KEEPALIVE.pong) arrive(JSON.parse(String(message.data)) as HubMessage);
  });
  socket.addEventListener("close", (close) => arrive({ kind: "closed", code: close.code }));
  socket.addEventListener("error", () => arrive({ kind: "closed", code: 1006 }));
  closed.addEventListener("abort", () => wake?.());
  return {
    async next(ms: number): Promise<Arrival | undefined> {
      if (queue.length === 0 && !closed.aborted) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, ms);
          wake = done;
          function done() {
            clearTimeout(timer);
            wake = undefined;
            resolve();
          }
        });
      }
      return queue.shift();
    },
  };
}

/** The socket's keep-alive, beside the client's: a socket closing meanwhile is the inbox's news, not an error here. */
function keepAlive(socket: WebSocket) {
  try {
    socket.send(KEEPALIVE.ping);
  } catch {
    // closing: its close event ends the stream
  }
}

/** Closes the hub's socket, which may have closed already. */
export function closeSocket(socket: WebSocket) {
  try {
    socket.close(1000, "the stream ended");
  } catch {
    // closed already: the hub let go of it
  }
}

/**
 * The stream's text, frame by frame, from a socket `subscribe` opened. Reads the first backfill page (or, with no cursor
 * and no `since`, where the present is) before returning, so a bad cursor is the caller's 410 rather than a broken
 * stream. `closed` (the client went away) ends it at once rather than at the next frame. However it ends, the socket
 * is closed, which frees the stream's place in its hub.
 */
export async function eventFrames(
  { db, data }: { db: Database; data: KeyData },
  {
    request,
    key,
    socket,
    timing,
    closed,
  }: { request: StreamRequest; key: StreamKey; socket: WebSocket; timing: StreamTiming; closed: AbortSignal },
): Promise<AsyncGenerator<string>> {
  const inbox = inboxOf(socket, closed);
  // The key's data (the catalogue's, or its account's sandbox's): the backfill meets the hub's pushes, so it reads the latest.
  const listFeed = (query: EventsQuery) => data.feed(query, { latest: true });
  const { facts } = data;
  const feedQuery = {
    after: request.after,
    since: request.since,
    type: request.rule.types ? [...request.rule.types] : undefined,
    limit: BACKFILL_PAGE,
  } as EventsQuery;
  const backfills = request.after !== undefined || request.since !== undefined;
  const [first, opening] = await Promise.all([backfills ? listFeed(feedQuery) : undefined, openingReads(db, key, data)]);
  /** The last event examined (sent or not): where the stream goes on from, and where its client resumes. */
  let lastId = backfills ? request.after : opening.present;
  let { expiresAt } = opening;
  const expired = () => expiresAt !== null && Date.now() >= expiresAt;

  async function* run(): AsyncGenerator<string> {
    const started = Date.now();
    let lastWrite = started;
    let lastPing = started;
    /**
     * What this connection sent: a push of an event the backfill sent (committed as the stream subscribed), or one
     * pushed again (a publish retried), is not sent twice.
     */
    const sent = new Set<string>();
    try {
      yield `retry: ${RECONNECT_MS}\n: connected\n\n`;
      for (let page = first, examined = 0; page; ) {
        examined += page.events.length;
        // A page cut short by its archive budget may hold no event, but its cursor is the last one looked at.
        lastId = page.next_cursor ?? page.events.at(-1)?.id ?? lastId;
        const wanted = await matchAlerts(facts, { events: page.events.map(alertEventOfFeed), rules: [request.rule] });
        if (wanted.length > 0) {
          if (expired()) {
            yield KEY_GONE;
            return;
          }
          for (const { event } of wanted) sent.add(event.id);
          lastWrite = Date.now();
          yield wanted.map(({ event }) => eventFrame(event.feed)).join("");
        }
        if (page.next_cursor === null) break;
        if (examined >= BACKFILL_EXAMINED_MAX || Date.now() - started >= timing.lifetimeMs) {
          yield cursorFrame(page.next_cursor);
          return;
        }
        page = await listFeed({
          ...feedQuery,
          after: page.next_cursor,
          limit: Math.min(BACKFILL_PAGE, BACKFILL_EXAMINED_MAX - examined),
        });
      }
      const ends = started + timing.lifetimeMs;
      while (!closed.aborted && Date.now() < ends) {
        if (expired()) {
          yield KEY_GONE;
          return;
        }
        if (Date.now() - lastWrite >= timing.heartbeatMs) {
          lastWrite = Date.now();
          if (lastWrite - lastPing >= SOCKET_PING_MS) {
            lastPing = lastWrite;
            keepAlive(socket);
          }
          yield ": keep-alive\n\n";
        }
        const arrival = await inbox.next(Math.min(ends, lastWrite + timing.heartbeatMs, expiresAt ?? ends) - Date.now());
        if (arrival?.kind === "key") expiresAt = arrival.expiresAt;
        else if (arrival?.kind === "closed") {
          if (arrival.code === KEY_GONE_CLOSE) {
            yield KEY_GONE;
            return;
          }
          break; // the hub went away (a restart, a deploy): the client resumes from D1 with Last-Event-ID
        } else if (arrival?.kind === "events") {
          const fresh = arrival.events.filter((event) => !sent.has(event.id));
          if (fresh.length === 0) continue;
          if (expired()) {
            yield KEY_GONE;
            return;
          }
          for (const event of fresh) sent.add(event.id);
          lastId = fresh.at(-1)!.id;
          lastWrite = Date.now();
          yield fresh.map((event) => event.frame).join("");
        }
      }
      // The last event examined, so a client whose rules matched nothing resumes past it rather than at the present.
      yield `: the server ends this stream; reconnect with Last-Event-ID\n\n${lastId === undefined ? "" : cursorFrame(lastId)}`;
    } finally {
      closeSocket(socket);
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
