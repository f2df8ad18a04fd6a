import { and, eq, lte, sql } from "drizzle-orm";
import { alertEventOf, matchAlerts } from "../alerts/match.ts";
import type { Database } from "../platform/db.ts";
import { webhookDeliveries, webhooks } from "../platform/tables.ts";
import type { DeliveryMessage, EventMessage } from "./messages.ts";
import type { DeliveryRow, WebhookRow } from "./service.ts";

/** The queue consumer's reads and writes of D1 (src/webhooks/consumer.ts). */

/**
 * Every account's enabled webhooks that want the event (its types, min_change_pct and alert rules,
 * decided by src/alerts/rules.ts): one delivery message each. One D1 query for the webhooks, and at
 * most two for the rules' facts, for the whole batch.
 */
export async function fanOut(db: Database, archive: R2Bucket, events: readonly EventMessage[]): Promise<DeliveryMessage[]> {
  const enabled = await db
    .select({ id: webhooks.id, types: webhooks.events, minChangeBp: webhooks.minChangeBp, filters: webhooks.filters })
    .from(webhooks)
    .where(eq(webhooks.status, "enabled"));
  const wanted = await matchAlerts(
    db,
    events.map((message) => ({ ...alertEventOf(message), message })),
    enabled,
    archive,
  );
  return wanted.map(({ event, rule }): DeliveryMessage => ({ kind: "delivery", webhook_id: rule.id, event: event.message.event }));
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
    await db.batch([
      insert,
      db
        .update(webhooks)
        .set({ status: "disabled", disabledAt: attempt.deliveredAt, disabledReason: "The endpoint answered 410 Gone." })
        .where(thisWebhook),
    ]);
  } else {
    const limit = new Date(Date.parse(attempt.deliveredAt) - FAILING_DAYS_TO_DISABLE * 86_400_000).toISOString();
    await db.batch([
      insert,
      db
        .update(webhooks)
        .set({ failingSince: sql`coalesce(${webhooks.failingSince}, ${attempt.deliveredAt})` })
        .where(thisWebhook),
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
