import { and, eq, lte, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { webhookDeliveries, webhooks } from "../platform/tables.ts";
import type { DeliveryMessage, EventMessage } from "./messages.ts";
import type { DeliveryRow, WebhookRow } from "./service.ts";

/** The queue consumer's reads and writes of D1 (src/webhooks/consumer.ts). */

/** Whether a webhook with this threshold wants this price change: |new − old| / old ≥ min_change_pct, exactly. */
export function meetsThreshold(minChangeBp: number, change: EventMessage["price_change"]): boolean {
  if (minChangeBp === 0 || change == null || change.old_minor === 0) return true;
  const delta = BigInt(Math.abs(change.new_minor - change.old_minor));
  return delta * 10_000n >= BigInt(minChangeBp) * BigInt(change.old_minor);
}

/**
 * Every account's enabled webhooks whose `events` hold the event's type and, for a price change,
 * whose `min_change_pct` it reaches: one delivery message each. One D1 query for the whole batch.
 */
export async function fanOut(db: Database, events: readonly EventMessage[]): Promise<DeliveryMessage[]> {
  const enabled = await db
    .select({ id: webhooks.id, events: webhooks.events, minChangeBp: webhooks.minChangeBp })
    .from(webhooks)
    .where(eq(webhooks.status, "enabled"));
  return events.flatMap((message) =>
    enabled
      .filter((webhook) => (webhook.events as string[]).includes(message.event.type))
      .filter((webhook) => message.event.type !== "price.changed" || meetsThreshold(webhook.minChangeBp, message.price_change))
      .map((webhook): DeliveryMessage => ({ kind: "delivery", webhook_id: webhook.id, event: message.event })),
  );
}

export function findWebhook(db: Database, id: string): Promise<WebhookRow | undefined> {
  return db.select().from(webhooks).where(eq(webhooks.id, id)).get();
}

/** A webhook whose every delivery has failed for this long is disabled (Svix's rule). */
export const FAILING_DAYS_TO_DISABLE = 5;

/**
 * One attempt's record and, in the same batch, what it means for the webhook: a success clears its
 * `failing_since`; a failure sets it if unset, and disables the webhook once it is FAILING_DAYS_TO_DISABLE
 * old; a 410 disables it at once.
 */
export async function recordAttempt(db: Database, attempt: Omit<DeliveryRow, "id">): Promise<void> {
  const insert = db.insert(webhookDeliveries).values(attempt);
  const thisWebhook = eq(webhooks.id, attempt.webhookId);
  if (attempt.outcome === "delivered") {
    await db.batch([insert, db.update(webhooks).set({ failingSince: null }).where(thisWebhook)]);
  } else if (attempt.outcome === "disabled") {
    await db.batch([insert, db.update(webhooks).set({ status: "disabled", disabledAt: attempt.deliveredAt, disabledReason: "The endpoint answered 410 Gone." }).where(thisWebhook)]);
  } else {
    const limit = new Date(Date.parse(attempt.deliveredAt) - FAILING_DAYS_TO_DISABLE * 86_400_000).toISOString();
    await db.batch([
      insert,
      db.update(webhooks).set({ failingSince: sql`coalesce(${webhooks.failingSince}, ${attempt.deliveredAt})` }).where(thisWebhook),
      db
        .update(webhooks)
        .set({
          status: "disabled",
          disabledAt: attempt.deliveredAt,
          disabledReason: sql`'Every delivery has failed for ${sql.raw(String(FAILING_DAYS_TO_DISABLE))} days (since ' || ${webhooks.failingSince} || ').'`,
        })
        .where(and(thisWebhook, eq(webhooks.status, "enabled"), lte(webhooks.failingSince, limit))),
    ]);
  }
}
