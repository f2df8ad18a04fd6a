import { and, asc, isNull, lt, or, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { logger } from "../platform/log.ts";
import { events } from "../platform/tables.ts";
import { type EventMessage, sendAll, type WebhookMessage } from "./messages.ts";
import { RETENTION_MS } from "./retention.ts";

/**
 * The outbox: the event rows an ingestion writes in its own D1 batch (src/observations/write.ts), the relay
 * that puts them on WEBHOOK_QUEUE right after the commit, and the sweep (the cron trigger) that
 * re-sends what the relay could not, and what was relayed but never fanned out (its claim lapsed, or no
 * one claimed it). The consumer claims
 * each event before fanning it out (`claimForFanOut`), so a relay and a sweep sending the same event
 * cannot fan it out twice; the claim is a lease, so a consumer that dies holding it loses nothing.
 */

export type EventRow = typeof events.$inferSelect;

/** An unsent event older than this is the sweep's: the relay had its chance. */
export const SWEEP_AFTER_MS = 30_000;
/**
 * A claim on an event lasts this long: if its holder failed or died before queuing the deliveries, another may take
 * it, and the sweep sends it again. A fan-out takes seconds (the first delivery's `waitUntil` ends 30 s after the
 * answer); 45 s lets the once-a-minute sweep find a lapsed claim by its second run, so a failed first delivery is
 * fanned out again within 2 minutes, whatever else failed with it. A claimer that outlives it may fan out twice.
 */
const CLAIM_LEASE_MS = 45_000;
/** A relayed event neither claimed nor fanned out this long after is sent again by the sweep (its message was lost). */
export const STUCK_AFTER_MS = 15 * 60_000;
/** Rows a sweep sends, and rows it deletes, per run (once a minute). */
const SWEEP_BATCH = 500;
const DELETE_BATCH = 1000;

const log = logger("outbox");

/** The queue message of a stored event (in D1, the archive or a sandbox's object), as the ingestion built it. */
export function eventMessageOf(row: Pick<EventRow, "id" | "type" | "timestamp" | "payload" | "oldMinor" | "newMinor">): EventMessage {
  const { data } = JSON.parse(row.payload) as { data: Record<string, unknown> };
  const message: EventMessage = { kind: "event", event: { id: row.id, type: row.type, timestamp: row.timestamp, data } };
  if (row.type === "price.changed") {
    message.price_change = row.oldMinor === null || row.newMinor === null ? null : { old_minor: row.oldMinor, new_minor: row.newMinor };
  }
  return message;
}

const idsIn = (ids: readonly string[]) => sql`${events.id} IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`;

/**
 * Sends the events and marks them relayed. A failure is logged, not thrown: the events are committed
 * and the sweep sends them; the caller's answer does not depend on the queue.
 */
export async function relayEvents(db: Database, queue: Queue<WebhookMessage>, messages: readonly EventMessage[]): Promise<boolean> {
  if (messages.length === 0) return true;
  try {
    await sendAll(queue, messages);
  } catch (error) {
    log.error("relay failed, the sweep will send these", { error: String(error), events: messages.map((m) => m.event.id) });
    return false;
  }
  await db
    .update(events)
    .set({ relayedAt: new Date().toISOString() })
    .where(and(idsIn(messages.map((m) => m.event.id)), isNull(events.relayedAt)));
  return true;
}

/**
 * The cron's outbox work: re-send events still unsent SWEEP_AFTER_MS after their commit (oldest
 * first, SWEEP_BATCH a run), then delete events past the retention (DELETE_BATCH a run): those the
 * archive left in D1 because they were never fanned out (src/events/archive.ts).
 */
export async function sweepOutbox(
  db: Database,
  queue: Queue<WebhookMessage>,
  now = Date.now(),
): Promise<{ relayed: number; deleted: number }> {
  const [unsent, stuck] = await db.batch([
    db
      .select()
      .from(events)
      .where(and(isNull(events.relayedAt), lt(events.createdAt, new Date(now - SWEEP_AFTER_MS).toISOString())))
      .orderBy(asc(events.createdAt))
      .limit(SWEEP_BATCH),
    db
      .select()
      .from(events)
      .where(
        and(
          isNull(events.fannedOutAt),
          or(
            lt(events.relayedAt, new Date(now - STUCK_AFTER_MS).toISOString()),
            lt(events.claimedAt, new Date(now - CLAIM_LEASE_MS).toISOString()),
          ),
        ),
      )
      .orderBy(asc(events.relayedAt))
      .limit(SWEEP_BATCH),
  ]);
  const again = [...unsent, ...stuck];
  const sent = await relayEvents(db, queue, again.map(eventMessageOf));
  // Stuck events were relayed before: relayEvents left their relayed_at alone; once sent, restart their clock and drop
  // the lapsed claim, so the next run does not send them again while their new message waits in the queue. Unsent,
  // they stay as they are, for the next run.
  if (sent && stuck.length > 0)
    await db
      .update(events)
      .set({ relayedAt: new Date(now).toISOString(), claimedAt: null })
      .where(and(idsIn(stuck.map((row) => row.id)), isNull(events.fannedOutAt)));
  const cutoff = new Date(now - RETENTION_MS).toISOString();
  const deleted = await db.run(
    sql`DELETE FROM ${events} WHERE seq IN (SELECT seq FROM ${events} WHERE timestamp < ${cutoff} ORDER BY seq LIMIT ${DELETE_BATCH})`,
  );
  return { relayed: sent ? again.length : 0, deleted: deleted.meta.changes };
}

/**
 * Claims events for fan-out: one conditional UPDATE, so of two consumers given the same event (a relay
 * and a sweep raced), only one gets it back: not fanned out, and not claimed by another within
 * CLAIM_LEASE_MS. Returns the ids claimed now.
 */
export async function claimForFanOut(db: Database, ids: readonly string[]): Promise<Set<string>> {
  const now = Date.now();
  const claimed = await db
    .update(events)
    .set({ claimedAt: new Date(now).toISOString() })
    .where(
      and(
        idsIn([...new Set(ids)]),
        isNull(events.fannedOutAt),
        or(isNull(events.claimedAt), lt(events.claimedAt, new Date(now - CLAIM_LEASE_MS).toISOString())),
      ),
    )
    .returning({ id: events.id });
  return new Set(claimed.map((row) => row.id));
}

/** The claimed events' deliveries are queued: done, for good. */
export async function markFannedOut(db: Database, ids: readonly string[]): Promise<void> {
  if (ids.length > 0) await db.update(events).set({ fannedOutAt: new Date().toISOString() }).where(idsIn(ids));
}

/** Gives claimed events back (their fan-out could not be sent), so the queue's retry, or the sweep, fans them out. */
export async function releaseFanOut(db: Database, ids: readonly string[]): Promise<void> {
  await db.update(events).set({ claimedAt: null }).where(idsIn(ids));
}

/**
 * Events a path gave up on (the dead-letter queue received them, or the first delivery failed): unsent again, so a
 * relay or the sweep starts them over.
 */
export async function requeueEvents(db: Database, ids: readonly string[]): Promise<void> {
  await db
    .update(events)
    .set({ relayedAt: null, claimedAt: null })
    .where(and(idsIn(ids), isNull(events.fannedOutAt)));
}
