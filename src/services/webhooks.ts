import { and, desc, eq, sql } from "drizzle-orm";
import type { Database } from "../db/client.ts";
import { webhookDeliveries, webhooks, type WebhookEventType } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { newId } from "../ids.ts";
import { sendAll, WEBHOOK_TEST_EVENT, type DeliveryMessage, type EventMessage, type WebhookMessage } from "../webhooks/messages.ts";
import { encryptSecret, generateWebhookSecret } from "../webhooks/secrets.ts";

/** Per account, enabled or disabled: enough for an endpoint per environment and per system, small enough to fan out. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 20;

/** GET /webhooks/:id/deliveries returns this many attempts, newest first. */
export const DELIVERIES_LISTED = 100;

export type WebhookRow = typeof webhooks.$inferSelect;
export type DeliveryRow = typeof webhookDeliveries.$inferSelect;

export interface NewWebhook {
  url: string;
  events: WebhookEventType[];
  minChangeBp: number;
  description: string | null;
}

export function webhookView(row: WebhookRow) {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    events: row.events,
    min_change_pct: row.minChangeBp / 100,
    status: row.status,
    created_at: row.createdAt,
    disabled_at: row.disabledAt,
    disabled_reason: row.disabledReason,
  };
}

export function deliveryView(row: DeliveryRow) {
  return {
    event_id: row.eventId,
    type: row.type,
    attempt: row.attempt,
    status_code: row.statusCode,
    error: row.error,
    duration_ms: row.durationMs,
    outcome: row.outcome,
    delivered_at: row.deliveredAt,
  };
}

const notFound = (id: string) => new ApiError(404, `No webhook ${id} in this account.`);

/** Creates the webhook; the secret is in this answer only. */
export async function createWebhook(db: Database, secretKey: string, accountId: string, input: NewWebhook) {
  const id = newId("whk");
  const secret = generateWebhookSecret();
  const row: WebhookRow = {
    id,
    accountId,
    url: input.url,
    description: input.description,
    events: input.events,
    minChangeBp: input.minChangeBp,
    status: "enabled",
    secretCiphertext: await encryptSecret(secretKey, id, secret),
    createdAt: new Date().toISOString(),
    disabledAt: null,
    disabledReason: null,
  };
  // One statement, so two concurrent creates cannot both slip under the cap.
  const result = await db.run(sql`
    INSERT INTO ${webhooks} (id, account_id, url, description, events, min_change_bp, status, secret_ciphertext, created_at)
    SELECT ${row.id}, ${accountId}, ${row.url}, ${row.description}, ${JSON.stringify(row.events)}, ${row.minChangeBp}, 'enabled', ${row.secretCiphertext}, ${row.createdAt}
    WHERE (SELECT count(*) FROM ${webhooks} WHERE account_id = ${accountId}) < ${MAX_WEBHOOKS_PER_ACCOUNT}`);
  if (result.meta.changes !== 1) {
    throw new ApiError(409, `This account already has ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks; delete one before creating another.`);
  }
  return { ...webhookView(row), secret };
}

export function listWebhooks(db: Database, accountId: string): Promise<WebhookRow[]> {
  return db.select().from(webhooks).where(eq(webhooks.accountId, accountId)).orderBy(desc(webhooks.createdAt), desc(webhooks.id)).all();
}

export async function getWebhook(db: Database, accountId: string, id: string): Promise<WebhookRow> {
  const row = await db
    .select()
    .from(webhooks)
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId)))
    .get();
  if (!row) throw notFound(id);
  return row;
}

/** Deletes the webhook and its delivery records; deliveries still queued for it are dropped. */
export async function deleteWebhook(db: Database, accountId: string, id: string): Promise<void> {
  const deleted = await db
    .delete(webhooks)
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId)))
    .returning({ id: webhooks.id });
  if (deleted.length === 0) throw notFound(id);
}

/** Queues a `webhook.test` event for this webhook alone, whatever its `events` filter. */
export async function sendTestEvent(db: Database, queue: Queue<WebhookMessage>, accountId: string, id: string) {
  const webhook = await getWebhook(db, accountId, id);
  if (webhook.status !== "enabled") throw new ApiError(409, `Webhook ${id} is disabled (${webhook.disabledReason ?? "no reason recorded"}); create a new one.`);
  const eventId = newId("evt");
  const timestamp = new Date().toISOString();
  const message: DeliveryMessage = {
    kind: "delivery",
    webhook_id: id,
    event: { id: eventId, type: WEBHOOK_TEST_EVENT, timestamp, data: { event_id: eventId, webhook_id: id, message: "A test event from the Price Data API." } },
  };
  await sendAll(queue, [message]);
  return { event_id: eventId, type: WEBHOOK_TEST_EVENT, status: "queued" as const };
}

export async function listDeliveries(db: Database, accountId: string, id: string) {
  await getWebhook(db, accountId, id);
  const rows = await db.select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, id)).orderBy(desc(webhookDeliveries.id)).limit(DELIVERIES_LISTED);
  return { webhook_id: id, deliveries: rows.map(deliveryView) };
}

// ---- The consumer's side ------------------------------------------------------------------------

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
