import { and, eq, sql } from "drizzle-orm";
import type { DeliveryMessage } from "../../events/messages.ts";
import type { Database } from "../../platform/db.ts";
import { webhooks } from "../../platform/tables.ts";
import { controlEvent } from "./mcp-occurrence.ts";
import type { FannedSubscription } from "./rows.ts";

/**
 * The extension's `gap` for what an account's budget held back (docs/webhooks.md "MCP events subscriptions"): a
 * subscription's deliveries past its account's budget are not made, and the last of them is kept on its row
 * (`gap_cursor`). The next fan-out with room for that subscription sends it a `gap` envelope carrying that cursor first
 * (counted in the same budget), or the next refresh answers `truncated: true` with it: either way once, so a budget
 * that stays exhausted costs no envelope per event. The events stay in the feed: events/poll or a subscribe from the
 * client's older cursor reads them.
 */

/** The deliveries with a `gap` first for each of their subscriptions that has one pending. */
export function withPendingGaps(subscriptions: ReadonlyMap<string, FannedSubscription>, deliveries: readonly DeliveryMessage[]) {
  const pending = new Map<string, string>();
  for (const { webhook_id: id } of deliveries) {
    const cursor = subscriptions.get(id)?.gapCursor;
    if (cursor) pending.set(id, cursor);
  }
  const gaps = [...pending].map(
    ([id, cursor]): DeliveryMessage => ({ kind: "delivery", webhook_id: id, event: controlEvent("gap", { cursor }) }),
  );
  return [...gaps, ...deliveries];
}

/** What a budget's answer means for the subscriptions' gaps: those sent, and each one's last delivery held back. */
export interface GapChanges {
  sent: { id: string; cursor: string }[];
  skipped: { id: string; cursor: string }[];
}

export function gapChanges(
  subscriptions: ReadonlyMap<string, FannedSubscription>,
  made: readonly DeliveryMessage[],
  heldBack: readonly DeliveryMessage[],
): GapChanges {
  const cursorOf = ({ event }: DeliveryMessage) => (event.type === "gap" ? String(event.data.cursor) : event.id);
  const skipped = new Map<string, string>();
  for (const delivery of heldBack) {
    if (!subscriptions.has(delivery.webhook_id)) continue;
    const cursor = cursorOf(delivery);
    if (cursor > (skipped.get(delivery.webhook_id) ?? "")) skipped.set(delivery.webhook_id, cursor);
  }
  return {
    sent: made.filter(({ event }) => event.type === "gap").map((delivery) => ({ id: delivery.webhook_id, cursor: cursorOf(delivery) })),
    skipped: [...skipped].map(([id, cursor]) => ({ id, cursor })),
  };
}

const TERMINATED_REASON = "Terminated: the API key that made this subscription was revoked or has expired.";

/**
 * One D1 batch, only when there is something to write: gaps sent are cleared (unless a later one was kept since), the
 * last held-back delivery of each subscription kept (the later of it and one pending), and the subscriptions whose
 * `terminated` the fan-out would send disabled. Returns those this batch disabled: a concurrent fan-out that found the
 * same one does not send it again (the cron deletes them once lapsed).
 */
export async function settleSubscriptions(
  db: Database,
  { sent, skipped }: GapChanges,
  terminated: readonly string[],
): Promise<Set<string>> {
  const d1 = db.$client;
  const statements = [
    ...(sent.length > 0
      ? [
          d1
            .prepare(`UPDATE webhooks SET gap_cursor = NULL FROM json_each(?) AS u
              WHERE webhooks.id = u.value ->> 'id' AND webhooks.gap_cursor = u.value ->> 'cursor'`)
            .bind(JSON.stringify(sent)),
        ]
      : []),
    ...(skipped.length > 0
      ? [
          d1
            .prepare(`UPDATE webhooks SET gap_cursor = max(coalesce(gap_cursor, ''), u.value ->> 'cursor') FROM json_each(?) AS u
              WHERE webhooks.id = u.value ->> 'id'`)
            .bind(JSON.stringify(skipped)),
        ]
      : []),
  ];
  if (terminated.length > 0) {
    const disable = db
      .update(webhooks)
      .set({ status: "disabled", disabledAt: new Date().toISOString(), disabledReason: TERMINATED_REASON })
      .where(and(sql`${webhooks.id} IN (SELECT value FROM json_each(${JSON.stringify(terminated)}))`, eq(webhooks.status, "enabled")))
      .returning({ id: webhooks.id })
      .toSQL();
    statements.push(d1.prepare(disable.sql).bind(...disable.params));
  }
  if (statements.length === 0) return new Set();
  const results = await d1.batch<{ id: string }>(statements);
  return new Set(terminated.length > 0 ? results.at(-1)!.results.map(({ id }) => id) : []);
}
