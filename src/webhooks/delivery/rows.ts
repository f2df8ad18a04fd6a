import { sql } from "drizzle-orm";
import { WEBHOOK_DISABLED_EVENTS, webhookDisabledEvents } from "../../account-events/webhook-disabled.ts";
import { type FactSources, matchInEnvironments } from "../../alerts/environments.ts";
import { type AlertEvent, alertEventOf } from "../../alerts/match.ts";
import type { DeliveryMessage, EventMessage } from "../../events/messages.ts";
import type { Database } from "../../platform/db.ts";
import { insertRows } from "../../platform/json-rows.ts";
import { ACCOUNT_EVENT_TYPES, apiKeys, products, webhookDeliveries, webhookRuleValues, webhooks } from "../../platform/tables.ts";
import { DAY_MS } from "../../platform/time.ts";
import { abandonRetries } from "../abandoned-retries.ts";
import type { DeliveryRow, WebhookRow } from "../service.ts";
import { controlEvent, forbidden } from "./mcp-occurrence.ts";

/** The queue consumer's reads and writes of D1 (src/webhooks/delivery/consumer.ts). */

const isAccountEvent = (message: EventMessage) => (ACCOUNT_EVENT_TYPES as readonly string[]).includes(message.event.type);

/**
 * The enabled webhooks that may want one of these events, by webhook_rule_values (migrations/0015, rows of enabled
 * webhooks only): for a catalogue event, those with no list by its type, and those filed under every list they have
 * by its values (its competitor and SKU, its product's brand and category now): a single-list webhook by any event's
 * value, once per batch, a webhook of several lists counted per event. For an account event, its account's. Index
 * seeks on what the events hold (CROSS JOIN keeps SQLite from scanning the index instead), so what a batch reads does
 * not grow with other webhooks' rules (contract, "Tenants apart"). The rules are then decided in full on these alone.
 * Only live webhooks are filed under rule values (migrations/0018_test_mode.sql); a sandbox event's candidates are its
 * account's test webhooks, read by account: through the account's index (the unary `+` keeps SQLite off the status
 * index, which read every other account's enabled webhooks, 20,000 rows for none returned).
 */
function candidateWebhooks(catalogue: readonly AlertEvent[], accounts: readonly string[], sandboxes: readonly string[]) {
  const asked = catalogue.map((event) => ({
    t: event.type,
    c: event.data.competitor_id,
    s: event.data.sku,
    p: event.data.product_id,
  }));
  return sql`WITH asked AS MATERIALIZED (SELECT e.key AS n, e.value ->> 't' AS type, e.value ->> 'c' AS competitor,
      e.value ->> 's' AS sku, p.brand, p.category
      FROM json_each(${JSON.stringify(asked)}) e LEFT JOIN ${products} p ON p.id = e.value ->> 'p'),
    listed(n, kind, value) AS (SELECT n, 'competitors', competitor FROM asked UNION ALL SELECT n, 'brands', brand FROM asked
      UNION ALL SELECT n, 'categories', category FROM asked UNION ALL SELECT n, 'skus', sku FROM asked)
  SELECT webhook_id FROM ${webhookRuleValues} WHERE kind = 'events' AND value IN (SELECT type FROM asked)
  UNION
  SELECT r.webhook_id FROM (SELECT DISTINCT kind, value FROM listed) d
    CROSS JOIN ${webhookRuleValues} r ON r.kind = d.kind AND r.value = d.value AND r.lists = 1
  UNION
  SELECT r.webhook_id FROM listed CROSS JOIN ${webhookRuleValues} r ON r.kind = listed.kind AND r.value = listed.value AND r.lists > 1
    GROUP BY listed.n, r.webhook_id HAVING count(*) = max(r.lists)
  UNION
  SELECT w.id FROM json_each(${JSON.stringify(accounts)}) a CROSS JOIN ${webhooks} w ON w.account_id = a.value
    WHERE +w.status = 'enabled' AND +w.environment = 'live'
  UNION
  SELECT w.id FROM json_each(${JSON.stringify(sandboxes)}) a CROSS JOIN ${webhooks} w ON w.account_id = a.value
    WHERE +w.status = 'enabled' AND +w.environment = 'test'`;
}

/** An MCP subscription a fan-out met: whose budgets its deliveries count in, and its pending gap (src/webhooks/delivery/mcp-gaps.ts). */
export interface FannedSubscription {
  accountId: string;
  gapCursor: string | null;
}

export interface FannedOut {
  deliveries: DeliveryMessage[];
  /** The subscriptions among the deliveries' webhooks. */
  subscriptions: Map<string, FannedSubscription>;
  /** Subscriptions found whose key no longer admits: each has a `terminated` delivery among `deliveries`, once. */
  terminated: string[];
}

/** fanOut's deliveries alone. */
export const fanOut = async (sources: FactSources, events: readonly EventMessage[]): Promise<DeliveryMessage[]> =>
  (await fanOutWithSubscriptions(sources, events)).deliveries;

/**
 * The enabled webhooks that want the event (their types, min_change_pct and alert rules, decided by
 * src/alerts/rules.ts): one delivery message each; an MCP subscription past its expires_at (lapsed) is not one of them.
 * An account event (src/account-events/) goes only to its own account's webhooks that subscribe to its type; the alert
 * rules are about prices; a sandbox event only to its account's test webhooks. One D1 query for the webhooks
 * (candidateWebhooks), and at most two for the rules' facts, for the whole batch (and for each account's sandbox in it).
 * A subscription found whose key no longer admits (revoked, expired) is sent a `terminated` envelope instead of any
 * event (the extension's delivery-time check), and the caller disables it (src/webhooks/delivery/mcp-gaps.ts), so it is sent once.
 */
export async function fanOutWithSubscriptions(sources: FactSources, events: readonly EventMessage[]): Promise<FannedOut> {
  const { db } = sources;
  const accountEvents = events.filter(isAccountEvent);
  const changes = events.filter((message) => !isAccountEvent(message));
  const catalogue = changes.filter((message) => message.sandbox_account_id === undefined).map(alertEventOf);
  const sandboxes = [...new Set(changes.flatMap((message) => message.sandbox_account_id ?? []))];
  const now = new Date().toISOString();
  const found = await db
    .select({
      id: webhooks.id,
      accountId: webhooks.accountId,
      environment: webhooks.environment,
      types: webhooks.events,
      minChangeBp: webhooks.minChangeBp,
      filters: webhooks.filters,
      source: webhooks.source,
      gapCursor: webhooks.gapCursor,
      keyAdmits: sql<number>`${keyAdmits(now)}`,
    })
    .from(webhooks)
    .where(
      sql`${webhooks.id} IN (${candidateWebhooks(
        catalogue,
        accountEvents.map((message) => String(message.event.data.account_id)),
        sandboxes,
      )}) AND (${webhooks.apiKeyId} IS NULL OR ${webhooks.expiresAt} > ${now})`,
    );
  const enabled = found.filter((webhook) => webhook.keyAdmits);
  const terminated = found.filter((webhook) => !webhook.keyAdmits).map((webhook) => webhook.id);
  const delivery = (webhookId: string, event: DeliveryMessage["event"]): DeliveryMessage => ({
    kind: "delivery",
    webhook_id: webhookId,
    event,
  });
  const own = accountEvents.flatMap((message) =>
    enabled
      .filter((webhook) => webhook.accountId === message.event.data.account_id && webhook.types.includes(message.event.type as never))
      .map((webhook) => delivery(webhook.id, message.event)),
  );
  // Live changes to live webhooks; each account's sandbox changes to that account's test webhooks: never across.
  const wanted = await matchInEnvironments(sources, changes, enabled);
  const ended = terminated.map((id) =>
    delivery(id, controlEvent("terminated", forbidden("The API key that made this subscription was revoked or has expired."))),
  );
  return {
    deliveries: [...wanted.map(({ event, rule }) => delivery(rule.id, event.message.event)), ...own, ...ended],
    subscriptions: new Map(
      found
        .filter((webhook) => webhook.source === "mcp")
        .map((webhook) => [webhook.id, { accountId: webhook.accountId, gapCursor: webhook.gapCursor }]),
    ),
    terminated,
  };
}

/**
 * A webhook, or an MCP subscription whose key still admits (not revoked, not expired: one lookup by the key's id), so a
 * subscription ends with its key as its key's requests do.
 */
const keyAdmits = (now: string) => sql`(${webhooks.apiKeyId} IS NULL OR EXISTS (SELECT 1 FROM ${apiKeys} k
  WHERE k.id = ${webhooks.apiKeyId} AND k.status = 'active' AND (k.expires_at IS NULL OR k.expires_at > ${now})))`;

/** The webhooks a queue batch's deliveries go to, in one D1 query. */
export async function webhooksByIds(db: Database, ids: readonly string[]): Promise<Map<string, WebhookRow>> {
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
 * it disabled: src/account-events/webhook-disabled.ts; a disabled webhook's retries abandoned: abandonRetries),
 * each statement only when some webhook needs it.
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
  // Retries of the webhooks this batch disabled, or that another request disabled while an attempt was on its way.
  const retried = [...byWebhook].filter(([, made]) => made.some((attempt) => attempt.outcome === "retrying")).map(([id]) => id);
  const abandoning = [...new Set([...disabling.map(({ id }) => id), ...retried])];
  const abandon = abandoning.length > 0 ? abandonRetries(db, abandoning).toSQL() : undefined;
  await d1.batch([
    ...insertRows(d1, { table: webhookDeliveries, rows: attempts }),
    ...(failing.length > 0 ? [d1.prepare(FAILING_SINCE).bind(JSON.stringify(failing))] : []),
    ...(disabling.length > 0
      ? [
          d1.prepare(DISABLE).bind(JSON.stringify(disabling)),
          d1.prepare(WEBHOOK_DISABLED_EVENTS).bind(await webhookDisabledEvents(disabledAt)),
        ]
      : []),
    ...(abandon ? [d1.prepare(abandon.sql).bind(...abandon.params)] : []),
  ]);
}
