import { derivedEventId } from "../platform/ids.ts";

/**
 * The account's `webhook.disabled` events of a queue batch's attempts, written in the same D1 batch right
 * after the update that may have disabled their webhooks (a 410, or the 5-day rule; src/webhooks/delivery/rows.ts),
 * built from each row (the reason included): only for a webhook this batch disabled (its row says disabled
 * at the instant the batch gave it), and once: the id is derived from the webhook and that instant, and a
 * batch retried writes nothing more (INSERT OR IGNORE). The outbox sweep relays them. The payload is the
 * WebhookDisabledEvent of ./schema.ts.
 */
export const WEBHOOK_DISABLED_EVENTS = `INSERT OR IGNORE INTO events (id, type, timestamp, payload, created_at, account_id)
  SELECT u.value ->> 'event_id', 'webhook.disabled', w.disabled_at,
    json_object('type', 'webhook.disabled', 'timestamp', w.disabled_at,
      'data', json_object('account_id', w.account_id, 'webhook_id', w.id, 'url', w.url, 'disabled_reason', w.disabled_reason)),
    w.disabled_at, w.account_id
  FROM json_each(?) AS u JOIN webhooks AS w ON w.id = u.value ->> 'id' AND w.status = 'disabled' AND w.disabled_at = u.value ->> 'at'`;

/** The parameter of WEBHOOK_DISABLED_EVENTS: each webhook that may be disabled, the instant it would be, and its event's id. */
export async function webhookDisabledEvents(candidates: readonly { id: string; at: string }[]): Promise<string> {
  const events = await Promise.all(
    candidates.map(async ({ id, at }) => ({ id, at, event_id: await derivedEventId(`webhook.disabled:${id}:${at}`) })),
  );
  return JSON.stringify(events);
}
