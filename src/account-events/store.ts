import type { EventMessage } from "../events/messages.ts";
import { newId } from "../platform/ids.ts";
import type { AccountEventData, AccountEventType } from "./schema.ts";

/**
 * Account events travel the catalogue events' outbox (the `events` table, its relay, sweep and signed,
 * retried deliveries): a row with `account_id` set, which GET /events leaves out and which fans out to
 * that account's webhooks only.
 */

/** An account event as the queue carries it; `data.account_id` names whose webhooks receive it. */
export function accountEventMessage<T extends AccountEventType>(type: T, data: AccountEventData<T>, timestamp: string): EventMessage {
  return { kind: "event", event: { id: newId("evt"), type, timestamp, data } };
}

/** The `events` row of an account event message. */
export function accountEventRow(message: EventMessage, createdAt: string) {
  const { id, type, timestamp, data } = message.event;
  return { id, type, timestamp, payload: JSON.stringify({ type, timestamp, data }), accountId: data.account_id as string, createdAt };
}
