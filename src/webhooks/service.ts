import { and, desc, eq, sql } from "drizzle-orm";
import { type DeliveryMessage, sendAll } from "../events/messages.ts";
import { type TestEventData, WEBHOOK_TEST_EVENT } from "../events/schema.ts";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { type webhookDeliveries, webhooks } from "../platform/tables.ts";
import { abandonRetries } from "./abandoned-retries.ts";
import {
  type CreatedWebhookView,
  onlySandboxTypes,
  SANDBOX_TYPES_ONLY,
  type TestEventQueuedView,
  type WebhookBody,
  type WebhookListView,
  type WebhookPatch,
  type WebhookView,
} from "./schema.ts";
import { encryptSecret, generateWebhookSecret } from "./secrets.ts";
import { acceptedWebhookUrl } from "./url-policy.ts";

/**
 * Per account, enabled or disabled: enough for an endpoint per environment and per system, small enough to fan out. MCP
 * subscriptions (source mcp) have their own cap (src/mcp/events/service.ts).
 */
export const MAX_WEBHOOKS_PER_ACCOUNT = 20;
/**
 * Of those, test webhooks (environment test), enabled or disabled: a sandbox change is sent to each, so this bounds the
 * signed POSTs one change makes (contract, fifth wave, "Per-account budgets").
 */
export const MAX_TEST_WEBHOOKS_PER_ACCOUNT = 2;

export type WebhookRow = typeof webhooks.$inferSelect;
export type DeliveryRow = typeof webhookDeliveries.$inferSelect;

export function webhookView(row: WebhookRow): WebhookView {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    environment: row.environment,
    events: row.events,
    min_change_pct: row.minChangeBp / 100,
    filters: row.filters,
    status: row.status,
    created_at: row.createdAt,
    disabled_at: row.disabledAt,
    disabled_reason: row.disabledReason,
    source: row.source,
    expires_at: row.expiresAt,
  };
}

const notFound = (id: string) => new ApiError(404, `No webhook ${id} in this account.`);

/** An account's webhook, by id; another account's is 404. */
export interface WebhookOfAccount {
  accountId: string;
  id: string;
}

/** Creates the webhook; the secret is in this answer only. */
export async function createWebhook(
  { db, config }: Pick<RequestServices, "db" | "config">,
  { accountId, body: input }: { accountId: string; body: WebhookBody },
): Promise<CreatedWebhookView> {
  const url = acceptedWebhookUrl(input.url, config.WEBHOOK_ALLOW_INSECURE_URLS);
  const id = newId("whk");
  const secret = generateWebhookSecret();
  const row: WebhookRow = {
    id,
    accountId,
    url,
    description: input.description || null,
    events: input.events,
    minChangeBp: input.min_change_pct, // already basis points (the schema's transform)
    filters: input.filters,
    status: "enabled",
    secretCiphertext: await encryptSecret(config.WEBHOOK_SECRET_KEY, { webhookId: id, secret }),
    createdAt: new Date().toISOString(),
    disabledAt: null,
    disabledReason: null,
    failingSince: null,
    previousSecretCiphertext: null,
    previousSecretExpiresAt: null,
    environment: input.environment,
    source: "webhook",
    expiresAt: null,
    apiKeyId: null,
    gapCursor: null,
  };
  // One statement, so two concurrent creates cannot both slip under a cap.
  const result = await db.run(sql`
    INSERT INTO ${webhooks} (id, account_id, url, description, events, min_change_bp, filters, status, secret_ciphertext, created_at,
      environment)
    SELECT ${row.id}, ${accountId}, ${row.url}, ${row.description}, ${JSON.stringify(row.events)}, ${row.minChangeBp},
      ${row.filters === null ? null : JSON.stringify(row.filters)}, 'enabled', ${row.secretCiphertext}, ${row.createdAt}, ${row.environment}
    WHERE (SELECT count(*) FROM ${webhooks} WHERE account_id = ${accountId} AND source = 'webhook') < ${MAX_WEBHOOKS_PER_ACCOUNT}
      AND (${row.environment} = 'live'
        OR (SELECT count(*) FROM ${webhooks} WHERE account_id = ${accountId} AND environment = 'test' AND source = 'webhook')
          < ${MAX_TEST_WEBHOOKS_PER_ACCOUNT})`);
  // D1's `changes` counts the rows its triggers write too (webhook_rule_values): none at all means a cap refused it.
  if (result.meta.changes === 0) throw await capRefusal(db, accountId, row.environment);
  return { ...webhookView(row), secret };
}

/** Which cap refused a creation: the test webhooks' (400, the contract's fifth wave) or all webhooks' (409). Read on refusal only. */
async function capRefusal(db: Database, accountId: string, environment: WebhookRow["environment"]): Promise<ApiError> {
  const tests = await db.$count(
    webhooks,
    and(eq(webhooks.accountId, accountId), eq(webhooks.environment, "test"), eq(webhooks.source, "webhook")),
  );
  if (environment === "test" && tests >= MAX_TEST_WEBHOOKS_PER_ACCOUNT)
    return new ApiError(
      400,
      `Invalid body: environment: this account already has ${MAX_TEST_WEBHOOKS_PER_ACCOUNT} test webhooks, the most an account may ` +
        "have (enabled or disabled); delete one, or point one at another URL with PATCH, before creating another.",
    );
  return new ApiError(409, `This account already has ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks; delete one before creating another.`);
}

export async function listWebhooks(db: Database, accountId: string): Promise<WebhookListView> {
  const rows = await db
    .select()
    .from(webhooks)
    .where(eq(webhooks.accountId, accountId))
    .orderBy(desc(webhooks.createdAt), desc(webhooks.id))
    .all();
  return { webhooks: rows.map(webhookView) };
}

export const getWebhook = async (db: Database, webhook: WebhookOfAccount): Promise<WebhookView> =>
  webhookView(await findAccountWebhook(db, webhook));

/** The account's webhook row, for the services that act on it: 404 for an unknown id and for another account's webhook alike. */
export async function findAccountWebhook(db: Database, { accountId, id }: WebhookOfAccount): Promise<WebhookRow> {
  const row = await db
    .select()
    .from(webhooks)
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId)))
    .get();
  if (!row) throw notFound(id);
  return row;
}

/** The webhook, for an action that sends to it (test, replay): 409 when it is disabled. */
export async function findEnabledWebhook(db: Database, { accountId, id }: WebhookOfAccount): Promise<WebhookRow> {
  const webhook = await findAccountWebhook(db, { accountId, id });
  if (webhook.status !== "enabled")
    throw new ApiError(
      409,
      `Webhook ${id} is disabled (${webhook.disabledReason ?? "no reason recorded"}); enable it with PATCH /webhooks/${id} first.`,
    );
  return webhook;
}

/** Deletes the webhook and its delivery records; deliveries still queued for it are dropped. */
export async function deleteWebhook(db: Database, { accountId, id }: WebhookOfAccount): Promise<void> {
  const deleted = await db
    .delete(webhooks)
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId)))
    .returning({ id: webhooks.id });
  if (deleted.length === 0) throw notFound(id);
}

export const DISABLED_BY_ACCOUNT = "Disabled by the account.";

/**
 * Edits a webhook. The URL passes the same policy as at creation; enabling clears the reason (and the
 * 5-day failure clock), disabling records that the account did it and abandons its retries. A status it already has
 * changes nothing.
 */
export async function updateWebhook(
  { db, config }: Pick<RequestServices, "db" | "config">,
  { accountId, id, patch }: WebhookOfAccount & { patch: WebhookPatch },
): Promise<WebhookView> {
  const url = patch.url === undefined ? undefined : acceptedWebhookUrl(patch.url, config.WEBHOOK_ALLOW_INSECURE_URLS);
  const current = await findAccountWebhook(db, { accountId, id });
  if (current.environment === "test" && patch.events !== undefined && !onlySandboxTypes(patch.events))
    throw new ApiError(400, `Invalid body: events: ${SANDBOX_TYPES_ONLY}.`);
  // What an MCP subscription listens for and where it delivers are what its id is made of (src/mcp/events/service.ts).
  const identity = (["url", "events", "min_change_pct", "filters"] as const).find((field) => patch[field] !== undefined);
  if (current.source === "mcp" && identity)
    throw new ApiError(
      400,
      `Invalid body: ${identity}: an MCP subscription's url, events, min_change_pct and filters cannot change (they make its id); ` +
        "its key unsubscribes and subscribes again instead. description and status may change.",
    );
  const changes: Partial<WebhookRow> = {
    url,
    events: patch.events,
    minChangeBp: patch.min_change_pct,
    filters: patch.filters,
    description: patch.description === undefined ? undefined : patch.description || null,
  };
  if (patch.status === "enabled" && current.status !== "enabled")
    Object.assign(changes, { status: "enabled", disabledAt: null, disabledReason: null, failingSince: null });
  if (patch.status === "disabled" && current.status !== "disabled")
    Object.assign(changes, { status: "disabled", disabledAt: new Date().toISOString(), disabledReason: DISABLED_BY_ACCOUNT });
  const setting = Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined));
  // Values it already has (a stale "Disable" on a webhook the 5-day rule disabled) change nothing: the record as it is.
  if (Object.keys(setting).length === 0) return webhookView(current);
  const update = db
    .update(webhooks)
    .set(setting)
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId)))
    .returning();
  const [[row]] = setting.status === "disabled" ? await db.batch([update, abandonRetries(db, [id])]) : [await update];
  if (!row) throw notFound(id);
  return webhookView(row);
}

/** Queues a `webhook.test` event for this webhook alone, whatever its `events` filter. */
export async function testWebhook(
  { db, queue }: Pick<RequestServices, "db" | "queue">,
  { accountId, id }: WebhookOfAccount,
): Promise<TestEventQueuedView> {
  await findEnabledWebhook(db, { accountId, id });
  const eventId = newId("evt");
  const timestamp = new Date().toISOString();
  const message: DeliveryMessage = {
    kind: "delivery",
    webhook_id: id,
    event: {
      id: eventId,
      type: WEBHOOK_TEST_EVENT,
      timestamp,
      data: { event_id: eventId, webhook_id: id, message: "A test event from the Price Data API." } satisfies TestEventData,
    },
  };
  await sendAll(queue, [message]);
  return { event_id: eventId, type: WEBHOOK_TEST_EVENT, status: "queued" };
}
