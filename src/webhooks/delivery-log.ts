import { desc, eq, sql } from "drizzle-orm";
import type { RequestServices } from "../http/app-env.ts";
import type { Database } from "../platform/db.ts";
import { events, webhookDeliveries } from "../platform/tables.ts";
import type { AccountSandbox } from "../sandbox/stub.ts";
import { latestAttempts } from "./delivery/delivery-archive.ts";
import type { DeliveryListView, DeliveryView } from "./schema.ts";
import { type DeliveryRow, findAccountWebhook, type WebhookOfAccount } from "./service.ts";

/** GET /webhooks/:id/deliveries: a webhook's delivery log as the account reads it. */

/** GET /webhooks/:id/deliveries returns this many attempts, newest first. */
const DELIVERIES_LISTED = 100;

function deliveryView(row: DeliveryRow, payload: string | undefined): DeliveryView {
  return {
    event_id: row.eventId,
    type: row.type,
    attempt: row.attempt,
    status_code: row.statusCode,
    error: row.error,
    duration_ms: row.durationMs,
    outcome: row.outcome,
    // The column holds every attempt's time (src/platform/tables.ts); only a delivered attempt has a delivery time.
    attempted_at: row.deliveredAt,
    delivered_at: row.outcome === "delivered" ? row.deliveredAt : null,
    response_excerpt: row.responseExcerpt,
    payload: payload === undefined ? null : (JSON.parse(payload) as DeliveryView["payload"]),
  };
}

/**
 * The latest attempts: D1 keeps the last minutes' (and more); older ones are in the archive
 * (src/webhooks/delivery/delivery-archive.ts).
 */
export async function listWebhookDeliveries(
  { db, archive, sandboxOf }: Pick<RequestServices, "db" | "archive"> & { sandboxOf: (accountId: string) => AccountSandbox },
  { accountId, id }: WebhookOfAccount,
): Promise<DeliveryListView> {
  const webhook = await findAccountWebhook(db, { accountId, id });
  const inD1 = await db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.webhookId, id))
    .orderBy(desc(webhookDeliveries.id))
    .limit(DELIVERIES_LISTED);
  const rows = await latestAttempts(archive, { webhookId: id, inD1, want: DELIVERIES_LISTED });
  const eventIds = [...new Set(rows.map((row) => row.eventId))];
  // A test webhook's events are its account's sandbox's, kept in its object; a live one's in D1.
  const payloads =
    eventIds.length === 0
      ? new Map<string, string>()
      : webhook.environment === "test"
        ? await sandboxOf(accountId).payloads(eventIds)
        : await eventPayloads(db, eventIds);
  return { webhook_id: id, deliveries: rows.map((row) => deliveryView(row, payloads.get(row.eventId))) };
}

/**
 * The bodies the listed attempts sent, from their events' rows while those are in D1 (a day; then only in the
 * archive, which the listing does not read): one query, the ids as one JSON parameter (up to 100 distinct ids
 * would otherwise meet D1's limit of 100 bound parameters).
 */
async function eventPayloads(db: Database, eventIds: readonly string[]): Promise<Map<string, string>> {
  const rows = await db
    .select({ id: events.id, payload: events.payload })
    .from(events)
    .where(sql`${events.id} IN (SELECT value FROM json_each(${JSON.stringify(eventIds)}))`);
  return new Map(rows.map((row) => [row.id, row.payload]));
}
