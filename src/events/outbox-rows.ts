import type { EventMessage } from "./messages.ts";

/**
 * The rows to insert for the events an ingestion emits (`now`: its commit's time). A module of its own, with
 * nothing of the Workers runtime, so the sample seed (scripts/seed.ts) writes its events exactly so too.
 */
export function outboxRows(messages: readonly EventMessage[], now: string) {
  return messages.map((message) => ({
    id: message.event.id,
    type: message.event.type,
    timestamp: message.event.timestamp,
    payload: JSON.stringify({ type: message.event.type, timestamp: message.event.timestamp, data: message.event.data }),
    oldMinor: message.price_change?.old_minor ?? null,
    newMinor: message.price_change?.new_minor ?? null,
    createdAt: now,
  }));
}
