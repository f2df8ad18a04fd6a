import type { WebhookEvent } from "../../events/messages.ts";
import { newEventId } from "../../platform/ids.ts";

/**
 * An event as the MCP events extension carries it (an `EventOccurrence`): the body of an MCP subscription's delivery
 * (src/webhooks/delivery/attempt.ts) and each entry of `events/poll`. `eventId` is the feed's event id (the webhook-id
 * too), `name` its type; `cursor` is the feed's position after it (the same id: GET /events?after=), from which a
 * subscribe or a poll replays. Deliveries are retried one by one, so an earlier event may still be on its way when a
 * later one arrives: a client that resubscribes from a cursor gets every event after it, not those before.
 */
export interface EventOccurrence {
  eventId: string;
  name: string;
  timestamp: string;
  data: Record<string, unknown>;
  cursor?: string | null;
}

/** The header that names the subscription on every delivery, so a receiver picks the secret before parsing the body. */
export const MCP_SUBSCRIPTION_HEADER = "X-MCP-Subscription-Id";

export const occurrenceOf = (event: Pick<WebhookEvent, "id" | "type" | "timestamp" | "data">): EventOccurrence => ({
  eventId: event.id,
  name: event.type,
  timestamp: event.timestamp,
  data: event.data,
});

/**
 * The extension's control envelopes (its "Non-event webhook bodies"), carried through the webhook machinery as deliveries
 * of an event of their own type, which no catalogue or account event has: `gap` (data: {cursor}, the last event the
 * account's budget held back: src/webhooks/delivery/mcp-gaps.ts) and `terminated` (data: {error}, the subscription has ended).
 */
const CONTROL_TYPES = ["gap", "terminated"] as const;
type ControlType = (typeof CONTROL_TYPES)[number];
const isControl = (event: Pick<WebhookEvent, "type">): event is WebhookEvent & { type: ControlType } =>
  (CONTROL_TYPES as readonly string[]).includes(event.type);

/** A control envelope as a delivery's event: its own id (so its webhook-id stays the same over its retries). */
export const controlEvent = (type: ControlType, data: Record<string, unknown>): WebhookEvent => {
  const timestamp = new Date().toISOString();
  return { id: newEventId(timestamp), type, timestamp, data };
};

/** The extension's -32012 Forbidden, as a `terminated` envelope carries it: why the subscription ended. */
export const forbidden = (reason: string) => ({ error: { code: -32012, message: "Forbidden", data: { reason } } });

/** The delivery body: the same bytes on every attempt; a control envelope's body is `{type, …its data}`. */
export const occurrenceBody = (event: WebhookEvent) =>
  JSON.stringify(isControl(event) ? { type: event.type, ...event.data } : { ...occurrenceOf(event), cursor: event.id });

/** The webhook-id: the event's id, a control envelope's `msg_<type>_<random>` (its id's random part). */
export const occurrenceMessageId = (event: WebhookEvent) => (isControl(event) ? `msg_${event.type}_${event.id.slice(4)}` : event.id);

/** A `terminated` envelope may still go to a subscription it just disabled (src/webhooks/delivery/mcp-gaps.ts); nothing else does. */
export const isTermination = (event: Pick<WebhookEvent, "type">) => event.type === "terminated";
