import { type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Database } from "../../platform/db.ts";
import { type AccountEventType, type apiKeys, events } from "../../platform/tables.ts";

export interface AccountEventFromRow {
  /** A derived id (ids.ts derivedEventId): the same for the same announcement, so the insert is a no-op the second time. */
  id: string;
  type: AccountEventType;
  /** The event's timestamp (ISO-8601). */
  at: string;
  /** The event's `data`, as SQL over the row (a json_object). */
  data: SQL;
  /** The row's account column. */
  accountId: SQLiteColumn;
  from: typeof apiKeys;
  where: SQL | undefined;
}

/**
 * An account event built from one row in the same statement as it is written (INSERT OR IGNORE ...
 * SELECT): for a writer that knows what happened but not the row's other fields (a key's object, for
 * usage.threshold), and must not read before it writes. No row, no event.
 */
export function insertAccountEventFrom(db: Database, { id, type, at, data, accountId, from, where }: AccountEventFromRow) {
  const none = (name: string) => sql<null>`NULL`.as(name);
  return db
    .insert(events)
    .select(
      db
        .select({
          seq: none("seq"),
          id: sql<string>`${id}`.as("id"),
          type: sql<string>`${type}`.as("type"),
          timestamp: sql<string>`${at}`.as("timestamp"),
          payload: sql<string>`json_object('type', ${type}, 'timestamp', ${at}, 'data', ${data})`.as("payload"),
          oldMinor: none("old_minor"),
          newMinor: none("new_minor"),
          createdAt: sql<string>`${at}`.as("created_at"),
          relayedAt: none("relayed_at"),
          claimedAt: none("claimed_at"),
          fannedOutAt: none("fanned_out_at"),
          accountId: sql<string>`${accountId}`.as("account_id"),
        })
        .from(from)
        .where(where),
    )
    .onConflictDoNothing();
}
