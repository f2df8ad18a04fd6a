import type { AlertRule } from "../alerts/rules.ts";
import type { KeyRequest } from "../api-keys/object/types.ts";
import type { Environment } from "../platform/tables.ts";

/**
 * What the stream's worker and its hub (src/stream/hub.ts) say to each other, and the frames both write. A module of
 * its own, with nothing of the Workers runtime, so the app (bundled for Node by the client generator) imports no object.
 */

/** An event as the stream sends it: `id`, `event`, `data` (the event exactly as GET /events gives it). */
export const eventFrame = (event: { id: string; type: string }) =>
  `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;

/** What a stream's worker registers with its hub, held as the socket's attachment. */
export interface Subscription {
  keyId: string;
  /** Names the key's object, which the hub asks whether the key still admits this stream when the key changes. */
  keyHash: string;
  accountId: string;
  /** The key's: a live stream gets the catalogue's events, a test stream its account's sandbox events (absent: live). */
  environment?: Environment;
  /** The client's address and the route's scope, as the key's object decides them. */
  request: KeyRequest;
  rule: AlertRule;
}

/** The header that carries the subscription (JSON, URI-encoded: a header is ASCII) on the WebSocket upgrade to the hub. */
export const SUBSCRIPTION_HEADER = "X-Stream-Subscription";

/** The header of a hub's answer to a connect that carries the work it did for it (a WorkCounts as JSON). */
export const OBJECT_WORK_HEADER = "X-Object-Work";

/** What a hub sends a stream's worker: events that passed its rule, or its key's new expiry (epoch ms, or null). */
export type HubMessage = { kind: "events"; events: { id: string; frame: string }[] } | { kind: "key"; expiresAt: number | null };

/**
 * What a stream's worker sends its hub at each heartbeat, and the answer the runtime gives for the hub without waking
 * it (its WebSocket auto-response): traffic that keeps an idle socket from being closed as idle, at no duration.
 */
export const KEEPALIVE = { ping: "ping", pong: "pong" } as const;

/** The close code of a socket whose key no longer admits its stream: the worker says so and ends the stream. */
export const KEY_GONE_CLOSE = 4001;

/** What a hub answers instead of a socket when the key or the account holds all the streams it may. */
export interface CapReached {
  cap: "key" | "account";
}
