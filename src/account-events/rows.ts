import type { EventMessage } from "../events/messages.ts";
import type { Database } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import type { AccountEventType } from "../platform/tables.ts";
import type { AccountEventData } from "./schema.ts";

/**
 * Account events travel the catalogue events' outbox (the `events` table, its relay, sweep and signed,
 * retried deliveries): a row with `account_id` set, which GET /events leaves out, the archive leaves in
 * D1, and the fan-out sends to that account's subscribed webhooks only.
 */

/** An account event as the queue carries it; `data.account_id` names whose webhooks receive it. */
export function accountEventMessage<T extends AccountEventType>({
  type,
  data,
  timestamp,
  id = newId("evt"),
}: {
  type: T;
  data: AccountEventData<T>;
  timestamp: string;
  id?: string;
}): EventMessage {
  return { kind: "event", event: { id, type, timestamp, data } };
}

/** The `events` row of an account event message. */
export function accountEventRow(message: EventMessage, createdAt: string) {
  const { id, type, timestamp, data } = message.event;
  return { id, type, timestamp, payload: JSON.stringify({ type, timestamp, data }), accountId: data.account_id as string, createdAt };
}

/**
 * Writes the events, each at most once: their ids are derived from what they announce (derivedEventId), and
 * INSERT OR IGNORE skips an id already stored. Returns those written now, for the relay. One statement.
 */
export async function insertOnce(db: Database, messages: readonly EventMessage[], now: string): Promise<EventMessage[]> {
  if (messages.length === 0) return [];
  const inserted = await db.$client
    .prepare(
      `INSERT OR IGNORE INTO events (id, type, timestamp, payload, created_at, account_id)
       SELECT json_extract(value, '$.id'), json_extract(value, '$.type'), json_extract(value, '$.timestamp'),
              json_extract(value, '$.payload'), json_extract(value, '$.createdAt'), json_extract(value, '$.accountId')
       FROM json_each(?) RETURNING id`,
    )
    .bind(JSON.stringify(messages.map((message) => accountEventRow(message, now))))
    .all<{ id: string }>();
  const written = new Set(inserted.results.map((row) => row.id));
  return messages.filter((message) => written.has(message.event.id));
}
