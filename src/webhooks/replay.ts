import { sql } from "drizzle-orm";
import { eventMessageOf, RETENTION_MS, type EventRow } from "../events/outbox.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { events, webhookDeliveries } from "../platform/tables.ts";
import { sendAll, type DeliveryMessage, type WebhookMessage } from "./messages.ts";
import { MAX_REPLAY_EVENTS, type ReplayRequest } from "./schema.ts";
import { getWebhook } from "./service.ts";

/**
 * POST /webhooks/:id/replay: the stored events of [since, until) that this webhook takes (its event
 * types and min_change_pct, as the fan-out decides), sent again to it alone with their original ids.
 * only_failed keeps the events it has not received: never delivered, and not still being retried.
 */
export async function replayEvents(db: Database, queue: Queue<WebhookMessage>, accountId: string, id: string, request: ReplayRequest) {
  const webhook = await getWebhook(db, accountId, id);
  if (webhook.status !== "enabled") throw new ApiError(409, `Webhook ${id} is disabled (${webhook.disabledReason ?? "no reason recorded"}); enable it with PATCH /webhooks/${id} first.`);
  const oldest = new Date(Date.now() - RETENTION_MS).toISOString();
  const since = request.since > oldest ? request.since : oldest;
  const until = request.until ?? new Date().toISOString();
  // The SQL twin of meetsThreshold (src/webhooks/deliveries.ts): |new − old| × 10,000 ≥ bp × old, in integers.
  const meetsThreshold = sql`(${events.type} <> 'price.changed' OR ${webhook.minChangeBp} = 0 OR ${events.oldMinor} IS NULL OR ${events.oldMinor} = 0
    OR abs(${events.newMinor} - ${events.oldMinor}) * 10000 >= ${webhook.minChangeBp} * ${events.oldMinor})`;
  const notReceived = sql`NOT EXISTS (SELECT 1 FROM ${webhookDeliveries} d WHERE d.webhook_id = ${id} AND d.event_id = ${events.id}
    AND (d.outcome = 'delivered' OR d.id = (SELECT max(id) FROM ${webhookDeliveries} l WHERE l.webhook_id = ${id} AND l.event_id = ${events.id}) AND d.outcome = 'retrying'))`;
  const rows: EventRow[] = await db
    .select()
    .from(events)
    .where(
      sql`${events.timestamp} >= ${since} AND ${events.timestamp} < ${until}
        AND ${events.type} IN (SELECT value FROM json_each(${JSON.stringify(webhook.events)})) AND ${meetsThreshold}
        ${request.only_failed ? sql`AND ${notReceived}` : sql``}`,
    )
    .orderBy(events.seq)
    .limit(MAX_REPLAY_EVENTS + 1);
  if (rows.length > MAX_REPLAY_EVENTS) {
    throw new ApiError(400, `Invalid body: until: more than ${MAX_REPLAY_EVENTS.toLocaleString("en")} events match; replay a shorter span (an earlier until), then the next.`);
  }
  const messages = rows.map((row): DeliveryMessage => ({ kind: "delivery", webhook_id: id, event: eventMessageOf(row).event }));
  try {
    await sendAll(queue, messages);
  } catch (error) {
    console.error(JSON.stringify({ level: "error", source: "replay", webhook_id: id, error: String(error) }));
    throw new ApiError(503, "The queue did not take every event; send the same request again (receivers drop repeats by webhook-id).", { "Retry-After": "1" });
  }
  return { queued: messages.length };
}
