import { eq, sql } from "drizzle-orm";
import { WEBHOOK_DISABLED_EVENTS, webhookDisabledEvents } from "../../account-events/webhook-disabled.ts";
import { alertEventOf, matchAlerts } from "../../alerts/match.ts";
import type { DeliveryMessage, EventMessage } from "../../events/messages.ts";
import type { Database } from "../../platform/db.ts";
import { insertRows } from "../../platform/json-rows.ts";
import { ACCOUNT_EVENT_TYPES, webhookDeliveries, webhooks } from "../../platform/tables.ts";
import { DAY_MS } from "../../platform/time.ts";
import type { DeliveryRow, WebhookRow } from "../service.ts";

/** The queue consumer's reads and writes of D1 (src/webhooks/delivery/consumer.ts). */

const isAccountEvent = (message: EventMessage) => (ACCOUNT_EVENT_TYPES as readonly string[]).includes(message.event.type);

/**
 * Every account's enabled webhooks that want the event (its types, min_change_pct and alert rules,
 * decided by src/alerts/rules.ts): one delivery message each. An account event (src/account-events/)
 * goes only to its own account's webhooks that subscribe to its type; the alert rules are about prices.
 * One D1 query for the webhooks, and at most two for the rules' facts, for the whole batch.
 */
export async function fanOut(db: Database, archive: R2Bucket, events: readonly EventMessage[]): Promise<DeliveryMessage[]> {
  const enabled = await db
    .select({
      id: webhooks.id,
      accountId: webhooks.accountId,
      types: webhooks.events,
      minChangeBp: webhooks.minChangeBp,
      filters: webhooks.filters,
    })
    .from(webhooks)
    .where(eq(webhooks.status, "enabled"));
  const delivery = (webhookId: string, message: EventMessage): DeliveryMessage => ({
    kind: "delivery",
    webhook_id: webhookId,
    event: message.event,
  });
  const own = events
    .filter(isAccountEvent)
    .flatMap((message) =>
      enabled
        .filter((webhook) => webhook.accountId === message.event.data.account_id && webhook.types.includes(message.event.type as never))
        .map((webhook) => delivery(webhook.id, message)),
    );
  const wanted = await matchAlerts(
    { db, archive },
    {
      events: events.filter((message) => !isAccountEvent(message)).map((message) => ({ ...alertEventOf(message), message })),
      rules: enabled,
    },
  );
  return [...wanted.map(({ event, rule }) => delivery(rule.id, event.message)), ...own];
}

/** The webhooks a queue batch's deliveries go to, in one D1 query. */
export async function findWebhooks(db: Database, ids: readonly string[]): Promise<Map<string, WebhookRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select()
    .from(webhooks)
    .where(sql`${webhooks.id} IN (SELECT value FROM json_each(${JSON.stringify([...new Set(ids)])}))`);
  return new Map(rows.map((row) => [row.id, row]));
}

/** A webhook whose every delivery has failed for this long is disabled (Svix's rule). */
export const FAILING_DAYS_TO_DISABLE = 5;

export type NewDelivery = Omit<DeliveryRow, "id">;

const GONE_REASON = "The endpoint answered 410 Gone.";

/**
 * What a webhook's attempts of one batch mean for it, in attempt order: a success clears `failing_since`
 * (reset); a failure after the last success sets it if unset (first_failure), and disables the webhook once
 * it is FAILING_DAYS_TO_DISABLE old at the last failure (limit); a 410 disables it at once (gone_at).
 */
const FAILING_SINCE = `UPDATE webhooks SET failing_since = CASE WHEN u.value ->> 'reset' THEN u.value ->> 'first_failure'
    ELSE coalesce(failing_since, u.value ->> 'first_failure') END
  FROM json_each(?) AS u WHERE webhooks.id = u.value ->> 'id'`;
const DISABLE = `UPDATE webhooks SET status = 'disabled', disabled_at = coalesce(u.value ->> 'gone_at', u.value ->> 'last_failure'),
    disabled_reason = CASE WHEN u.value ->> 'gone_at' IS NOT NULL THEN '${GONE_REASON}'
      ELSE 'Every delivery has failed for ${FAILING_DAYS_TO_DISABLE} days (since ' || failing_since || ').' END
  FROM json_each(?) AS u WHERE webhooks.id = u.value ->> 'id' AND webhooks.status = 'enabled'
    AND (u.value ->> 'gone_at' IS NOT NULL OR webhooks.failing_since <= u.value ->> 'limit')`;

/**
 * A batch's attempts recorded in ONE D1 batch: their rows (one statement, the rows as a JSON parameter) and
 * what they mean for their webhooks (FAILING_SINCE, DISABLE, and the account's webhook.disabled events of those
 * it disabled: src/account-events/webhook-disabled.ts), each statement only when some webhook needs it.
 * `known` is the webhooks as read before the attempts: a webhook whose attempts all succeeded and whose
 * failing_since was unset needs no update, so a batch of successes is one statement.
 */
export async function recordAttempts(
  db: Database,
  known: ReadonlyMap<string, WebhookRow>,
  attempts: readonly NewDelivery[],
): Promise<void> {
  if (attempts.length === 0) return;
  const d1 = db.$client;
  const byWebhook = new Map<string, NewDelivery[]>();
  for (const attempt of [...attempts].sort((a, b) => (a.deliveredAt < b.deliveredAt ? -1 : a.deliveredAt > b.deliveredAt ? 1 : 0))) {
    if (!byWebhook.has(attempt.webhookId)) byWebhook.set(attempt.webhookId, []);
    byWebhook.get(attempt.webhookId)!.push(attempt);
  }
  const failing: object[] = [];
  const disabling: { id: string; gone_at: string | null; last_failure: string | null; limit: string | null }[] = [];
  for (const [id, made] of byWebhook) {
    const lastSuccess = made.findLastIndex((attempt) => attempt.outcome === "delivered");
    const failures = made.slice(lastSuccess + 1).filter((attempt) => attempt.outcome === "retrying" || attempt.outcome === "failed");
    const gone = made.find((attempt) => attempt.outcome === "disabled");
    const firstFailure = failures[0]?.deliveredAt ?? null;
    const lastFailure = failures.at(-1)?.deliveredAt ?? null;
    const reset = lastSuccess >= 0;
    if (firstFailure !== null || (reset && known.get(id)?.failingSince !== null))
      failing.push({ id, reset: reset ? 1 : 0, first_failure: firstFailure });
    if (gone || lastFailure !== null)
      disabling.push({
        id,
        gone_at: gone?.deliveredAt ?? null,
        last_failure: lastFailure,
        limit: lastFailure && new Date(Date.parse(lastFailure) - FAILING_DAYS_TO_DISABLE * DAY_MS).toISOString(),
      });
  }
  const disabledAt = disabling.map(({ id, gone_at, last_failure }) => ({ id, at: (gone_at ?? last_failure)! }));
  await d1.batch([
    ...insertRows(d1, { table: webhookDeliveries, rows: attempts }),
    ...(failing.length > 0 ? [d1.prepare(FAILING_SINCE).bind(JSON.stringify(failing))] : []),
    ...(disabling.length > 0
      ? [
          d1.prepare(DISABLE).bind(JSON.stringify(disabling)),
          d1.prepare(WEBHOOK_DISABLED_EVENTS).bind(await webhookDisabledEvents(disabledAt)),
        ]
      : []),
  ]);
}
