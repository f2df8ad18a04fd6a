import type { WebhookEvent } from "../../events/messages.ts";

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

/** The delivery body: the same bytes on every attempt. */
export const occurrenceBody = (event: WebhookEvent) => JSON.stringify({ ...occurrenceOf(event), cursor: event.id });
