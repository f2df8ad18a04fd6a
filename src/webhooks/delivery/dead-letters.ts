import { and, desc, eq } from "drizzle-orm";
import { type DeliveryMessage, webhookMessage } from "../../events/messages.ts";
import { requeueEvents } from "../../events/outbox.ts";
import type { Database } from "../../platform/db.ts";
import { logger } from "../../platform/log.ts";
import { webhookDeliveries } from "../../platform/tables.ts";
import { webhooksByIds } from "./rows.ts";

/**
 * The dead-letter queue's consumer: what WEBHOOK_QUEUE gave up on.
 * - A delivery: its final failure is recorded (unless the last attempt already recorded it), so
 *   `POST /webhooks/:id/replay` with only_failed finds it.
 * - An event whose fan-out kept failing: made unsent again, so the outbox sweep starts it over.
 */

export const DEAD_LETTERED = "Given up: the delivery went to the dead-letter queue.";

const log = logger("webhook-dlq");

export async function handleDeadLetters(db: Database, batch: MessageBatch<unknown>): Promise<void> {
  const events: { message: Message<unknown>; id: string }[] = [];
  for (const message of batch.messages) {
    const parsed = webhookMessage.safeParse(message.body);
    try {
      if (!parsed.success) log.error("invalid dead letter dropped", { message_id: message.id });
      else if (parsed.data.kind === "event") {
        events.push({ message, id: parsed.data.event.id });
        continue; // acked only once it is unsent again, below
      } else await recordFinalFailure(db, parsed.data, message.attempts);
      message.ack();
    } catch (error) {
      log.error("dead letter not recorded; retried", { message_id: message.id, error: String(error) });
      message.retry();
    }
  }
  if (events.length === 0) return;
  try {
    await requeueEvents(
      db,
      events.map((event) => event.id),
    );
    for (const { message } of events) message.ack();
  } catch (error) {
    log.error("dead-lettered events not handed back; retried", {
      message_ids: events.map((event) => event.message.id),
      error: String(error),
    });
    for (const { message } of events) message.retry();
  }
}

async function recordFinalFailure(db: Database, message: DeliveryMessage, attempts: number): Promise<void> {
  if (!(await webhooksByIds(db, [message.webhook_id])).has(message.webhook_id)) return; // deleted since
  const last = await db
    .select({ outcome: webhookDeliveries.outcome, attempt: webhookDeliveries.attempt })
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.webhookId, message.webhook_id), eq(webhookDeliveries.eventId, message.event.id)))
    .orderBy(desc(webhookDeliveries.id))
    .get();
  if (last?.outcome === "failed" || last?.outcome === "delivered") return;
  await db.insert(webhookDeliveries).values({
    eventId: message.event.id,
    webhookId: message.webhook_id,
    type: message.event.type,
    attempt: Math.max(attempts, (last?.attempt ?? 0) + 1),
    statusCode: null,
    error: DEAD_LETTERED,
    durationMs: 0,
    outcome: "failed",
    deliveredAt: new Date().toISOString(),
    responseExcerpt: null,
  });
}
