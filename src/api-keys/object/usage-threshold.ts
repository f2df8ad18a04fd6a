import { eq, sql } from "drizzle-orm";
import type { Database } from "../../platform/db.ts";
import { derivedEventId } from "../../platform/ids.ts";
import { apiKeys } from "../../platform/tables.ts";
import { insertAccountEventFrom } from "./account-event-insert.ts";

/**
 * `usage.threshold`: a key reached 80 % or 100 % of its day quota. Decided where the count is kept, the
 * key's object, on the admission that passes the threshold (an object decides one request at a time, so that
 * admission is one and only one; after a wake that counted a block as made, the first admission passes what the
 * block did), never on the others: the hot path gains no I/O. The event is written off the request path with one D1 statement.
 *
 * Once, whatever fails: its id is derived from (key, UTC day, threshold) and written with INSERT OR IGNORE,
 * so a write retried (the object's alarm after a failure, see key-object.ts) adds nothing. The row
 * waits in the outbox (`relayed_at` null) and the cron's sweep puts it on the queue like any event
 * (within about 1.5 minutes); from there it is fanned out once (the outbox's claim), signed and retried.
 */

const USAGE_THRESHOLDS = [80, 100] as const;
export type UsageThreshold = (typeof USAGE_THRESHOLDS)[number];

/** The admitted request of the day that reaches `threshold` % of `perDay`. */
const countAt = (threshold: UsageThreshold, perDay: number) => Math.ceil((perDay * threshold) / 100);

/**
 * The thresholds the day's count passed going from `before` to `after` (from 0: every one it has reached, which the
 * alarm's retry announces again; the ids make that harmless).
 */
export const thresholdsCrossed = (before: number, after: number, perDay: number) =>
  USAGE_THRESHOLDS.filter((threshold) => before < countAt(threshold, perDay) && countAt(threshold, perDay) <= after);

export interface UsageNotice {
  keyId: string;
  /** Epoch ms of the UTC day the count belongs to. */
  dayStart: number;
  perDay: number;
  threshold: UsageThreshold;
  /** When it was reached (ISO-8601): the event's timestamp. */
  at: string;
}

/**
 * Writes the notices' events (the UsageThresholdEvent of src/account-events/schema.ts, its prefix and
 * account read from the key's row in the same statement). Each statement is an INSERT OR IGNORE; the
 * batch runs them in one round trip.
 */
export async function announceUsage(db: Database, notices: readonly UsageNotice[]): Promise<void> {
  const ids = await Promise.all(
    notices.map(({ keyId, dayStart, threshold }) =>
      derivedEventId(`usage.threshold:${keyId}:${new Date(dayStart).toISOString().slice(0, 10)}:${threshold}`),
    ),
  );
  const statements = notices.map(({ keyId, perDay, threshold, at }, i) =>
    insertAccountEventFrom(db, {
      id: ids[i]!,
      type: "usage.threshold",
      at,
      data: sql`json_object('account_id', ${apiKeys.accountId}, 'key_id', ${apiKeys.id}, 'prefix', ${apiKeys.prefix},
        'period', 'day', 'limit', ${perDay}, 'used', ${countAt(threshold, perDay)}, 'threshold', ${threshold})`,
      accountId: apiKeys.accountId,
      from: apiKeys,
      where: eq(apiKeys.id, keyId),
    }),
  );
  const [first, ...rest] = statements;
  if (first) await db.batch([first, ...rest]);
}
