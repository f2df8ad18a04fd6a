import { and, eq, getTableColumns, type SQL, sql } from "drizzle-orm";
import { alertEventOf, matchAlerts } from "../alerts/match.ts";
import { type ArchivedEvent, archivedThrough } from "../events/archive.ts";
import { archivedBetween, firstSeqSinceWithOwn } from "../events/archive-read.ts";
import { type DeliveryMessage, sendAll } from "../events/messages.ts";
import { eventMessageOf } from "../events/outbox.ts";
import { RETENTION_MS } from "../events/retention.ts";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { logger } from "../platform/log.ts";
import { events, webhookDeliveries } from "../platform/tables.ts";
import type { AccountBudgets } from "../rate-limit/stub.ts";
import { deliveriesQueued, takeDeliveries } from "./delivery/budgets.ts";
import { ATTEMPTS_SPAN_MS, archivedAttempts } from "./delivery/delivery-archive.ts";
import { type DeliveriesQueuedView, MAX_REPLAY_EVENTS, type ReplayRequest } from "./schema.ts";
import { type DeliveryRow, findEnabledWebhook, type WebhookOfAccount } from "./service.ts";

/** Stored events read a page at a time; at most REPLAY_SCAN_PAGES pages a call (then 400: narrow since/until). */
const REPLAY_PAGE = 1000;
const REPLAY_SCAN_PAGES = 200;

/**
 * POST /webhooks/:id/replay: the stored events of [since, until) that this webhook takes (its event
 * types, min_change_pct and alert rules, decided as the fan-out decides: src/alerts/match.ts), sent
 * again to it alone with their original ids. only_failed keeps the events it has not received: never
 * delivered, and not still being retried. SQL narrows by time, type and only_failed; the rules are
 * decided page by page in JavaScript, by the one implementation (at most 3 D1 queries a page). The oldest go first, as
 * many as the account's replayed-deliveries budget has room for; the rest are held back, and the answer says so.
 */
export async function replayWebhookEvents(
  {
    db,
    alerts,
    archive,
    queue,
    budgets,
    sandboxOf,
    sandboxFacts,
  }: Pick<RequestServices, "db" | "alerts" | "archive" | "queue" | "sandboxOf" | "sandboxFacts"> & { budgets: AccountBudgets },
  { accountId, id, request }: WebhookOfAccount & { request: ReplayRequest },
): Promise<DeliveriesQueuedView> {
  const webhook = await findEnabledWebhook(db, { accountId, id });
  const oldest = new Date(Date.now() - RETENTION_MS).toISOString();
  const since = request.since > oldest ? request.since : oldest;
  const until = request.until ?? new Date().toISOString();
  // only_failed: D1's attempts decide in SQL; those that left D1 (src/webhooks/delivery/delivery-archive.ts) are read once, for
  // the span's events and their retries (a delivery made by an earlier replay, later than that, is not seen: sent again),
  // an archive object at a time, each folded into what it says of each event before the next is read.
  const attempts = new AttemptOutcomes();
  if (request.only_failed) {
    const to = new Date(Math.min(Date.now(), Date.parse(until) + ATTEMPTS_SPAN_MS)).toISOString();
    for await (const rows of archivedAttempts(archive, { webhookId: id, from: since, to })) attempts.add(rows);
  }
  // "events"."id" spelled out: in a select list drizzle leaves a column unqualified (it would name the attempt's own id).
  const anyD1Attempt = sql<number>`EXISTS (SELECT 1 FROM ${webhookDeliveries} a WHERE a.webhook_id = ${id} AND a.event_id = "events"."id")`;
  const notReceived = sql`NOT EXISTS (SELECT 1 FROM ${webhookDeliveries} d WHERE d.webhook_id = ${id} AND d.event_id = ${events.id}
    AND (d.outcome = 'delivered'
      OR d.id = (SELECT max(id) FROM ${webhookDeliveries} l WHERE l.webhook_id = ${id} AND l.event_id = ${events.id})
        AND d.outcome = 'retrying'))`;
  const rule = { types: webhook.events, minChangeBp: webhook.minChangeBp, filters: webhook.filters };
  // A live webhook: the catalogue's events and its account's own (D1, then the archive); a test webhook: its account's
  // sandbox events only (its object).
  const sandbox = webhook.environment === "test" ? sandboxOf(accountId) : undefined;
  const facts = sandbox ? sandboxFacts(accountId) : { db, alerts };
  const taken = new Map<number, DeliveryMessage>(); // by seq: commit order, and an event read twice counts once
  const take = async (rows: readonly ArchivedEvent[]) => {
    if (rows.length === 0) return;
    const seqOf = new Map(rows.map((row) => [row.id, row.seq]));
    const wanted = await matchAlerts(facts, { events: rows.map((row) => alertEventOf(eventMessageOf(row))), rules: [rule] });
    for (const { event } of wanted)
      taken.set(seqOf.get(event.id)!, {
        kind: "delivery",
        webhook_id: id,
        event: { id: event.id, type: event.type, timestamp: event.timestamp, data: event.data },
      });
    if (taken.size > MAX_REPLAY_EVENTS) throw tooMany(`more than ${MAX_REPLAY_EVENTS.toLocaleString("en")} events match`);
  };
  if (sandbox) {
    // Its object's events of the span, a page at a time; only_failed judges them by their attempts as the archive's are.
    for (let page = 0, after: string | undefined; ; page++) {
      if (page === REPLAY_SCAN_PAGES) throw tooManyStored();
      const rows = await sandbox.events({ after, since, until, types: webhook.events, limit: REPLAY_PAGE });
      if (request.only_failed) attempts.add(await attemptsInD1(db, id, rows));
      await take(request.only_failed ? rows.filter((row) => attempts.notReceived(row.id)) : rows);
      if (rows.length < REPLAY_PAGE) break;
      after = rows.at(-1)!.id;
    }
  } else {
    // The last day from D1, above the archive's high-water mark, from the first seq that may be at since ...
    const start = (
      await db.select({ seq: sql<number>`max(${archivedThrough}, ${firstSeqSinceWithOwn(since, accountId)} - 1)` }).from(sql`(SELECT 1)`)
    )[0]!.seq;
    // ... the catalogue's range and the account's own, each an index range of (account_id, seq) in commit order, merged:
    // another account's events lie in neither.
    const page = (owner: SQL, afterSeq: number) =>
      db
        .select({ ...getTableColumns(events), anyD1Attempt })
        .from(events)
        .where(
          sql`${owner} AND ${events.seq} > ${afterSeq} AND ${events.timestamp} >= ${since} AND ${events.timestamp} < ${until}
            AND ${events.type} IN (SELECT value FROM json_each(${JSON.stringify(webhook.events)}))
            ${request.only_failed ? sql`AND ${notReceived}` : sql``}`,
        )
        .orderBy(events.seq)
        .limit(REPLAY_PAGE);
    const ranges = [
      { owner: sql`${events.accountId} IS NULL`, afterSeq: start, done: false },
      { owner: sql`${events.accountId} = ${accountId}`, afterSeq: start, done: false },
    ];
    for (let pages = 0; ranges.some((range) => !range.done); pages++) {
      if (pages === REPLAY_SCAN_PAGES) throw tooManyStored();
      for (const range of ranges.filter((range) => !range.done)) {
        const rows = await page(range.owner, range.afterSeq);
        // An event with no attempt left in D1 is judged by its archived ones.
        await take(request.only_failed ? rows.filter((row) => row.anyD1Attempt || attempts.notReceived(row.id)) : rows);
        range.done = rows.length < REPLAY_PAGE;
        if (rows.length > 0) range.afterSeq = rows.at(-1)!.seq;
      }
    }
    // ... then the archive up to the mark as it is now: what the archiver moved meanwhile is there, not lost.
    const through = (await db.select({ seq: sql<number>`${archivedThrough}` }).from(sql`(SELECT 1)`))[0]!.seq;
    const archived = (await archivedBetween(db, archive, { since, until, through })).filter((event) =>
      webhook.events.includes(event.type as never),
    );
    if (request.only_failed) attempts.add(await attemptsInD1(db, id, archived));
    await take(request.only_failed ? archived.filter((event) => attempts.notReceived(event.id)) : archived);
  }
  const messages = [...taken.entries()].sort(([a], [b]) => a - b).map(([, message]) => message);
  const grant = await takeDeliveries(budgets, accountId, "replayed-deliveries", messages.length);
  try {
    await sendAll(queue, messages.slice(0, grant.granted));
  } catch (error) {
    logger("replay").error("queue send failed", { webhook_id: id, error: String(error) });
    throw new ApiError(503, "The queue did not take every event; send the same request again (receivers drop repeats by webhook-id).", {
      "Retry-After": "1",
    });
  }
  return deliveriesQueued("replayed-deliveries", messages.length, grant);
}

const tooManyStored = () => tooMany(`more than ${(REPLAY_PAGE * REPLAY_SCAN_PAGES).toLocaleString("en")} stored events are in the span`);
const tooMany = (what: string) =>
  new ApiError(400, `Invalid body: until: ${what}; replay a shorter span (an earlier until), then the next.`);

/** D1's attempts of these events (archived, or a sandbox's) to this webhook. */
async function attemptsInD1(db: Database, id: string, archived: readonly ArchivedEvent[]) {
  if (archived.length === 0) return [];
  return db
    .select({ id: webhookDeliveries.id, eventId: webhookDeliveries.eventId, outcome: webhookDeliveries.outcome })
    .from(webhookDeliveries)
    .where(
      and(
        eq(webhookDeliveries.webhookId, id),
        sql`${webhookDeliveries.eventId} IN (SELECT value FROM json_each(${JSON.stringify(archived.map((event) => event.id))}))`,
      ),
    );
}

/**
 * What a webhook's attempts say of each event, folded as they are read (archive objects one at a time, then D1's): the
 * notReceived rule above, in JavaScript. An event is not received when no attempt delivered it and its last attempt
 * (the highest id) is not still being retried. One number per event: DELIVERED, or the last attempt's id, negative
 * while it is retrying; an attempt read twice (in two places after a crash) changes nothing.
 */
class AttemptOutcomes {
  static readonly #DELIVERED = 0; // attempt ids start at 1
  readonly #byEvent = new Map<string, number>();

  add(attempts: Iterable<Pick<DeliveryRow, "id" | "eventId" | "outcome">>): void {
    for (const { id, eventId, outcome } of attempts) {
      const known = this.#byEvent.get(eventId);
      if (known === AttemptOutcomes.#DELIVERED) continue;
      if (outcome === "delivered") this.#byEvent.set(eventId, AttemptOutcomes.#DELIVERED);
      else if (known === undefined || id > Math.abs(known)) this.#byEvent.set(eventId, outcome === "retrying" ? -id : id);
    }
  }

  notReceived(eventId: string): boolean {
    const known = this.#byEvent.get(eventId);
    return known === undefined || known > 0;
  }
}
