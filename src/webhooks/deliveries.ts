import { eq } from "drizzle-orm";
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

/** One attempt's record; a 410 also disables the webhook, in the same batch. */
export async function recordAttempt(db: Database, attempt: Omit<DeliveryRow, "id">): Promise<void> {
  const insert = db.insert(webhookDeliveries).values(attempt);
  if (attempt.outcome !== "disabled") {
    await insert;
    return;
  }
  await db.batch([
    insert,
    db
      .update(webhooks)
      .set({ status: "disabled", disabledAt: attempt.deliveredAt, disabledReason: "The endpoint answered 410 Gone." })
      .where(eq(webhooks.id, attempt.webhookId)),
  ]);
}
