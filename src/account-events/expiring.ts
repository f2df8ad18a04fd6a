import type { WebhookMessage } from "../events/messages.ts";
import { relayEvents } from "../events/outbox.ts";
import type { Database } from "../platform/db.ts";
import { derivedEventId } from "../platform/ids.ts";
import { DAY_MS } from "../platform/time.ts";
import { accountEventMessage, insertOnce } from "./rows.ts";

/** Keys announced per run (the cron runs every minute); more wait for the next run, oldest expiry first. */
const PER_RUN = 500;

interface ExpiringKey {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  expires_at: string;
  days_left: 7 | 1;
}

/**
 * The cron's `api_key.expiring` notices: 7 days before a key's `expires_at` (sent once the key is within
 * 7 days of it, but not yet in its last day) and 1 day before (in its last day). A key's row remembers the
 * notice it had (`expiry_notice_days`), so a run reads only keys owed one, through the index of expiring
 * active keys. Exactly once: the event's id is derived from the key, its expiry and the notice, and is
 * written with INSERT OR IGNORE, so two runs at once, or a run repeated after a failure between the
 * insert and the mark, announce it once. A rotated key is left out: its expiry is the end of a grace its
 * owner chose, and its successor is already in use.
 */
export async function announceExpiringKeys(db: Database, queue: Queue<WebhookMessage>, now = Date.now()): Promise<number> {
  const at = (ms: number) => new Date(ms).toISOString();
  const { results: due } = await db.$client
    .prepare(
      `SELECT id, account_id, name, prefix, expires_at, CASE WHEN expires_at <= ?2 THEN 1 ELSE 7 END AS days_left FROM api_keys
       WHERE expires_at IS NOT NULL AND status = 'active' AND expires_at > ?1 AND expires_at <= ?3 AND rotated_to IS NULL
         AND coalesce(expiry_notice_days, 99) > CASE WHEN expires_at <= ?2 THEN 1 ELSE 7 END
       ORDER BY expires_at LIMIT ${PER_RUN}`,
    )
    .bind(at(now), at(now + DAY_MS), at(now + 7 * DAY_MS))
    .all<ExpiringKey>();
  if (due.length === 0) return 0;
  const timestamp = at(now);
  const messages = await Promise.all(
    due.map(async (key) =>
      accountEventMessage({
        type: "api_key.expiring",
        data: {
          account_id: key.account_id,
          key_id: key.id,
          prefix: key.prefix,
          name: key.name,
          expires_at: key.expires_at,
          days_left: key.days_left,
        },
        timestamp,
        id: await derivedEventId(`api_key.expiring:${key.id}:${key.expires_at}:${key.days_left}`),
      }),
    ),
  );
  const written = await insertOnce(db, messages, timestamp);
  await db.$client
    .prepare(
      `UPDATE api_keys SET expiry_notice_days = json_extract(value, '$.days') FROM json_each(?) WHERE api_keys.id = ` +
        `json_extract(value, '$.id')`,
    )
    .bind(JSON.stringify(due.map((key) => ({ id: key.id, days: key.days_left }))))
    .run();
  await relayEvents(db, queue, written);
  return written.length;
}
