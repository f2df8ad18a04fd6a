import { sql } from "drizzle-orm";
import { eventMessageOf, RETENTION_MS, type EventRow } from "../events/outbox.ts";
import { alertEventOf, matchAlerts } from "../alerts/match.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { events, webhookDeliveries } from "../platform/tables.ts";
import { sendAll, type DeliveryMessage, type WebhookMessage } from "./messages.ts";
import { MAX_REPLAY_EVENTS, type ReplayRequest } from "./schema.ts";
import { getEnabledWebhook } from "./service.ts";

/** Stored events read a page at a time; at most REPLAY_SCAN_PAGES pages a call (then 400: narrow since/until). */
const REPLAY_PAGE = 1000;
const REPLAY_SCAN_PAGES = 200;

/**
 * POST /webhooks/:id/replay: the stored events of [since, until) that this webhook takes (its event
 * types, min_change_pct and alert rules, decided as the fan-out decides: src/alerts/match.ts), sent
 * again to it alone with their original ids. only_failed keeps the events it has not received: never
 * delivered, and not still being retried. SQL narrows by time, type and only_failed; the rules are
 * decided page by page in JavaScript, by the one implementation (at most 3 D1 queries a page).
 */
export async function replayEvents(db: Database, queue: Queue<WebhookMessage>, accountId: string, id: string, request: ReplayRequest) {
  const webhook = await getEnabledWebhook(db, accountId, id);
  const oldest = new Date(Date.now() - RETENTION_MS).toISOString();
  const since = request.since > oldest ? request.since : oldest;
  const until = request.until ?? new Date().toISOString();
  const notReceived = sql`NOT EXISTS (SELECT 1 FROM ${webhookDeliveries} d WHERE d.webhook_id = ${id} AND d.event_id = ${events.id}
    AND (d.outcome = 'delivered' OR d.id = (SELECT max(id) FROM ${webhookDeliveries} l WHERE l.webhook_id = ${id} AND l.event_id = ${events.id}) AND d.outcome = 'retrying'))`;
  const rule = { types: webhook.events, minChangeBp: webhook.minChangeBp, filters: webhook.filters };
  const messages: DeliveryMessage[] = [];
  let afterSeq = 0;
  for (let page = 0; ; page++) {
    if (page === REPLAY_SCAN_PAGES) throw tooMany(`more than ${(REPLAY_PAGE * REPLAY_SCAN_PAGES).toLocaleString("en")} stored events are in the span`);
    const rows: EventRow[] = await db
      .select()
      .from(events)
      .where(
        sql`${events.seq} > ${afterSeq} AND ${events.timestamp} >= ${since} AND ${events.timestamp} < ${until}
          AND ${events.type} IN (SELECT value FROM json_each(${JSON.stringify(webhook.events)}))
          ${request.only_failed ? sql`AND ${notReceived}` : sql``}`,
      )
      .orderBy(events.seq)
      .limit(REPLAY_PAGE);
    const wanted = await matchAlerts(db, rows.map((row) => alertEventOf(eventMessageOf(row))), [rule]);
    messages.push(...wanted.map(({ event }): DeliveryMessage => ({ kind: "delivery", webhook_id: id, event: { id: event.id, type: event.type, timestamp: event.timestamp, data: event.data } })));
    if (messages.length > MAX_REPLAY_EVENTS) throw tooMany(`more than ${MAX_REPLAY_EVENTS.toLocaleString("en")} events match`);
    if (rows.length < REPLAY_PAGE) break;
    afterSeq = rows.at(-1)!.seq;
  }
  try {
    await sendAll(queue, messages);
  } catch (error) {
    console.error(JSON.stringify({ level: "error", source: "replay", webhook_id: id, error: String(error) }));
    throw new ApiError(503, "The queue did not take every event; send the same request again (receivers drop repeats by webhook-id).", { "Retry-After": "1" });
  }
  return { queued: messages.length };
}

const tooMany = (what: string) => new ApiError(400, `Invalid body: until: ${what}; replay a shorter span (an earlier until), then the next.`);
