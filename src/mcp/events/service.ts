import { and, eq, sql } from "drizzle-orm";
import type { z } from "zod";
import type { AlertFacts } from "../../alerts/match.ts";
import { matchAlerts } from "../../alerts/match.ts";
import type { AlertRule } from "../../alerts/rules.ts";
import type { WebhookMessage } from "../../events/messages.ts";
import type { EventsQuery } from "../../events/query.ts";
import { ApiError } from "../../http/errors.ts";
import type { KeyData } from "../../key-data/door.ts";
import type { Config } from "../../platform/config.ts";
import type { Database } from "../../platform/db.ts";
import { sha256Hex } from "../../platform/hash.ts";
import { eventIdTime, newEventId, newId } from "../../platform/ids.ts";
import { type Environment, webhooks } from "../../platform/tables.ts";
import type { AccountBudgets } from "../../rate-limit/stub.ts";
import type { AccountSandbox } from "../../sandbox/stub.ts";
import { alertEventOfFeed } from "../../stream/service.ts";
import { USER_AGENT } from "../../webhooks/delivery/attempt.ts";
import { MCP_SUBSCRIPTION_HEADER, occurrenceOf } from "../../webhooks/delivery/mcp-occurrence.ts";
import { signedHeaders } from "../../webhooks/delivery/signing.ts";
import { replayWebhookEvents } from "../../webhooks/replay.ts";
import { decryptSecret, encryptSecret } from "../../webhooks/secrets.ts";
import { webhookUrlProblem } from "../../webhooks/url-policy.ts";
import {
  DEFAULT_POLL_EVENTS,
  DEFAULT_TTL_MS,
  EVENT_NAMES,
  type EventName,
  eventArguments,
  MAX_TTL_MS,
  MIN_TTL_MS,
  NEXT_POLL_MS,
  pollParams,
  subscribeParams,
  unsubscribeParams,
} from "./schema.ts";

/**
 * The MCP events extension on /mcp (docs/webhooks.md "MCP events subscriptions"): poll, subscribe and unsubscribe for price.changed and
 * stock.changed. A subscription IS a webhook row (source "mcp"): its id derived from (key, url, name, arguments), the key
 * that made it, its rules (the arguments: a webhook's alert rules), the client's own secret (encrypted like a webhook's),
 * an expires_at the client pushes on by subscribing again, and the key's environment (a test key's hears its sandbox
 * only). So the fan-out, the signing, the queue, the retries, the per-endpoint objects, auto-disable, replay and GET/DELETE
 * /webhooks serve it as they serve a webhook; the fan-out and each attempt skip a lapsed one.
 */

/** Subscriptions an account holds at most, over its keys (lapsed ones until the sweep removes them). */
export const MAX_SUBSCRIPTIONS_PER_ACCOUNT = 1000;
/** How long the previous secret still signs after a refresh brings a new one (the extension's dual-sign grace). */
const SECRET_GRACE_MS = 5 * 60_000;
/** The endpoint's answer to the verification POST must come within this. */
const VERIFY_TIMEOUT_MS = 5_000;
/** Feed events a poll examines at most (matching or not): then it answers with a cursor and hasMore. */
const POLL_PAGE = 500;
/** Lapsed subscriptions a sweep deletes at most per run. */
const SWEEP_BATCH = 500;

/** A JSON-RPC error of the extension's table (src/mcp/events/methods.ts sends it as it is). */
export class EventsError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

const INVALID_PARAMS = -32602;
const NOT_FOUND = -32011;
const FORBIDDEN = -32012;
const RESOURCE_EXHAUSTED = -32013;
const UNSUPPORTED = -32014;
const CALLBACK_ENDPOINT_ERROR = -32015;

export interface EventsServices {
  db: Database;
  /** The alert windows' own database (ALERTS_DB), which a replay's alert rules read. */
  alerts: Database;
  archive: R2Bucket;
  queue: Queue<WebhookMessage>;
  config: Pick<Config, "WEBHOOK_SECRET_KEY" | "WEBHOOK_ALLOW_INSECURE_URLS">;
  budgets: AccountBudgets;
  /** The accounts' sandboxes (a test key's subscription replays from its own, as a test webhook's replay does). */
  sandboxOf: (accountId: string) => AccountSandbox;
  sandboxFacts: (accountId: string) => AlertFacts;
  /** What the key reads (its environment's feed and facts): the one door, src/key-data/door.ts. */
  data: KeyData;
  /** The key calling: its id is the subscriptions' principal. */
  key: { id: string; accountId: string; environment: Environment; scopes?: readonly string[] | null | undefined };
}

function parsed<S extends z.ZodType>(schema: S, params: unknown): z.output<S> {
  const result = schema.safeParse(params ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const where = issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
  throw new EventsError(INVALID_PARAMS, `Invalid params: ${where}${issue.message}`);
}

/** The event type named (unknown: -32011) and the subscriber rule its arguments make (invalid: -32602). */
function ruleOf(name: string, raw: unknown): { name: EventName; rule: AlertRule; canonical: string } {
  if (!(EVENT_NAMES as readonly string[]).includes(name))
    throw new EventsError(NOT_FOUND, `No event type ${name}: events/list names ${EVENT_NAMES.join(" and ")}.`, { kind: "event" });
  const { min_change_pct: minChangeBp = 0, ...filters } = parsed(eventArguments, raw ?? {});
  const rule = { types: [name], minChangeBp, filters: Object.keys(filters).length === 0 ? null : filters };
  return { name: name as EventName, rule, canonical: canonicalJson({ min_change_pct: minChangeBp, ...filters }) };
}

/** JSON with every object's keys in order: arguments compare by this (the extension's canonical-JSON equality). */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object")
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`)
      .join(",")}}`;
  return JSON.stringify(value);
}

/** The events methods need the scope GET /events needs. */
function mayRead(key: EventsServices["key"]): void {
  if (key.scopes && !key.scopes.includes("events:read"))
    throw new EventsError(FORBIDDEN, "This API key lacks the events:read scope, which the events methods need.", { scope: "events:read" });
}

/** The delivery URL as stored (WHATWG-normalised), by the webhooks' URL policy; else -32602. */
function deliveryUrl(services: EventsServices, raw: string): string {
  const problem = webhookUrlProblem(raw, services.config.WEBHOOK_ALLOW_INSECURE_URLS);
  if (problem) throw new EventsError(INVALID_PARAMS, `Invalid params: delivery.url: ${problem}`);
  return new URL(raw).href;
}

/** The subscription's id: the same for the same (key, url, name, arguments), whatever the refreshes and restarts. */
const subscriptionId = async (keyId: string, url: string, name: string, canonical: string) =>
  `sub_${await sha256Hex(JSON.stringify([keyId, url, name, canonical]), 16)}`;

/**
 * "Now" as a cursor: the latest event of the key's feed (the catalogue's, or its sandbox's), or, in a feed with none,
 * an id carrying this instant (a cursor that is no event is read by the instant its id carries).
 */
async function present({ data }: EventsServices): Promise<string> {
  return (await data.newestEventId()) ?? newEventId(new Date().toISOString());
}

/**
 * events/poll: the key's feed after the cursor (GET /events' own read, or its sandbox's), its events matched against
 * the arguments by the rules the fan-out uses, at most maxEvents of them. A null cursor is now (no events, a fresh
 * cursor). A cursor past the retention (or behind maxAgeMs) answers from the oldest it may, with truncated.
 */
export async function pollEvents(services: EventsServices, params: unknown) {
  mayRead(services.key);
  const request = parsed(pollParams, params);
  const { name, rule } = ruleOf(request.name, request.arguments);
  const answer = (events: ReturnType<typeof occurrenceOf>[], cursor: string, truncated: boolean, hasMore: boolean) => ({
    events,
    cursor,
    truncated,
    hasMore,
    nextPollMs: NEXT_POLL_MS,
  });
  if (request.cursor == null) return answer([], await present(services), false, false);
  const { data } = services;
  const listFeed = (query: EventsQuery) => data.feed(query);
  const now = Date.now();
  const oldest = now - data.retentionMs;
  const floor = Math.max(oldest, request.maxAgeMs === undefined ? oldest : now - request.maxAgeMs);
  const at = Date.parse(eventIdTime(request.cursor));
  const truncated = !(at >= floor);
  const query = { type: [name], limit: POLL_PAGE, since: new Date(floor).toISOString() } as EventsQuery;
  const page = await listFeed({ ...query, after: truncated ? undefined : request.cursor }).catch(async (error: unknown) => {
    // No such event in the feed (a cursor made of an instant, or gone): by the instant its id carries.
    if (!(error instanceof ApiError && error.status === 410)) throw error;
    return listFeed({ ...query, since: new Date(Math.max(floor, at)).toISOString() });
  });
  const wanted = await matchAlerts(data.facts, {
    events: page.events.map(alertEventOfFeed),
    rules: [rule],
  });
  const limit = request.maxEvents ?? DEFAULT_POLL_EVENTS;
  const events = wanted.slice(0, limit).map(({ event }) => occurrenceOf(event));
  if (wanted.length > limit) return answer(events, events.at(-1)!.eventId, truncated, true);
  const cursor = page.next_cursor ?? page.events.at(-1)?.id ?? (truncated ? await present(services) : request.cursor);
  return answer(events, cursor, truncated, page.next_cursor !== null);
}

/**
 * events/subscribe: creates the subscription, or refreshes it (same key, url, name and arguments): a new TTL, the
 * secret replaced (the previous one still signs for SECRET_GRACE_MS), delivery re-enabled if it had been disabled, a
 * pending gap (src/webhooks/delivery/mcp-gaps.ts) answered as `truncated: true` with its cursor. A new
 * (principal, url) is first verified: a signed `verification` POST whose challenge the endpoint must echo. A new or
 * lapsed subscription with a cursor replays the events after it that its rules take (POST /webhooks/{id}/replay's own
 * path, in the account's replayed-deliveries budget).
 */
export async function subscribeEvents(services: EventsServices, params: unknown) {
  mayRead(services.key);
  const request = parsed(subscribeParams, params);
  const { name, rule, canonical } = ruleOf(request.name, request.arguments);
  if (request.delivery.mode !== undefined && request.delivery.mode !== "webhook")
    throw new EventsError(UNSUPPORTED, `Delivery mode ${request.delivery.mode} is not offered: events/subscribe is webhook delivery.`, {
      feature: "deliveryMode",
      value: request.delivery.mode,
    });
  const { db, config, key } = services;
  const url = deliveryUrl(services, request.delivery.url);
  const id = await subscriptionId(key.id, url, name, canonical);
  const now = Date.now();
  const ttl = Math.min(MAX_TTL_MS, Math.max(MIN_TTL_MS, request.ttlMs ?? (request.ttlMs === null ? MAX_TTL_MS : DEFAULT_TTL_MS)));
  const expiresAt = new Date(now + ttl).toISOString();
  const [[existing], [verified]] = await db.batch([
    db
      .select()
      .from(webhooks)
      .where(and(eq(webhooks.id, id), eq(webhooks.accountId, key.accountId))),
    db
      .select({ id: webhooks.id })
      .from(webhooks)
      .where(and(eq(webhooks.accountId, key.accountId), eq(webhooks.apiKeyId, key.id), eq(webhooks.url, url)))
      .limit(1),
  ]);
  if (!verified) await verifyEndpoint({ url, id, secret: request.delivery.secret });
  const secretCiphertext = await encryptSecret(config.WEBHOOK_SECRET_KEY, { webhookId: id, secret: request.delivery.secret });
  const lapsed = existing?.expiresAt != null && Date.parse(existing.expiresAt) <= now;
  if (existing) {
    const rotated =
      (await decryptSecret(config.WEBHOOK_SECRET_KEY, { webhookId: id, stored: existing.secretCiphertext })) !== request.delivery.secret;
    await db
      .update(webhooks)
      .set({
        expiresAt,
        secretCiphertext,
        // A gap pending (src/webhooks/delivery/mcp-gaps.ts) is told by this answer's truncated, so no envelope carries it again.
        ...(existing.gapCursor !== null ? { gapCursor: null } : {}),
        ...(rotated
          ? { previousSecretCiphertext: existing.secretCiphertext, previousSecretExpiresAt: new Date(now + SECRET_GRACE_MS).toISOString() }
          : {}),
        // Only a disabled one's status is written: the rule values' trigger rewrites them on any write of status.
        ...(existing.status === "disabled" ? { status: "enabled", disabledAt: null, disabledReason: null, failingSince: null } : {}),
      })
      .where(and(eq(webhooks.id, id), eq(webhooks.accountId, key.accountId)));
  } else {
    // One statement, so concurrent subscribes cannot both slip under the cap; a concurrent twin's insert is a refresh.
    const inserted = await db.run(sql`
      INSERT INTO ${webhooks} (id, account_id, url, description, events, min_change_bp, filters, status, secret_ciphertext, created_at,
        environment, source, expires_at, api_key_id)
      SELECT ${id}, ${key.accountId}, ${url}, ${`MCP events subscription of key ${key.id}`}, ${JSON.stringify([name])},
        ${rule.minChangeBp}, ${rule.filters === null ? null : JSON.stringify(rule.filters)}, 'enabled', ${secretCiphertext},
        ${new Date(now).toISOString()}, ${key.environment}, 'mcp', ${expiresAt}, ${key.id}
      WHERE (SELECT count(*) FROM ${webhooks} WHERE account_id = ${key.accountId} AND source = 'mcp') < ${MAX_SUBSCRIPTIONS_PER_ACCOUNT}
      ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at, secret_ciphertext = excluded.secret_ciphertext`);
    if (inserted.meta.changes === 0)
      throw new EventsError(
        RESOURCE_EXHAUSTED,
        `This account already has ${MAX_SUBSCRIPTIONS_PER_ACCOUNT} event subscriptions; unsubscribe one (or DELETE /webhooks/{id}) first.`,
        { limit: "subscriptions", max: MAX_SUBSCRIPTIONS_PER_ACCOUNT },
      );
  }
  let truncated = false;
  const replays = request.cursor != null && (!existing || lapsed || existing.status === "disabled");
  if (request.cursor != null && replays) {
    const floor = Math.max(now - services.data.retentionMs, request.maxAgeMs === undefined ? 0 : now - request.maxAgeMs);
    const at = Date.parse(eventIdTime(request.cursor));
    truncated = !(at >= floor);
    await replayFrom(services, id, new Date(truncated ? floor : at).toISOString());
  }
  // A replay from the client's cursor sends what a pending gap skipped; else the gap is told here.
  const gap = replays ? null : (existing?.gapCursor ?? null);
  return {
    id,
    refreshBefore: expiresAt,
    cursor: gap ?? (request.cursor != null && !truncated ? request.cursor : await present(services)),
    truncated: truncated || gap !== null,
    ...(existing
      ? {
          deliveryStatus: {
            active: existing.status === "enabled",
            ...(existing.failingSince ? { failedSince: existing.failingSince } : {}),
          },
        }
      : {}),
  };
}

/** The replay of a new or lapsed subscription: its events since `since`, through POST /webhooks/{id}/replay's service. */
async function replayFrom(services: EventsServices, id: string, since: string): Promise<void> {
  const { db, alerts, archive, queue, budgets, sandboxOf, sandboxFacts, key } = services;
  try {
    await replayWebhookEvents(
      { db, alerts, archive, queue, budgets, sandboxOf, sandboxFacts },
      { accountId: key.accountId, id, request: { since, only_failed: false } },
    );
  } catch (error) {
    if (error instanceof ApiError && error.status < 500)
      throw new EventsError(RESOURCE_EXHAUSTED, `The replay from this cursor was refused: ${error.detail}`, { limit: "replay" });
    throw error;
  }
}

/** events/unsubscribe: the key's subscription to (url, name, arguments), deleted with its delivery records; else -32011. */
export async function unsubscribeEvents(services: EventsServices, params: unknown) {
  mayRead(services.key);
  const request = parsed(unsubscribeParams, params);
  const { name, canonical } = ruleOf(request.name, request.arguments);
  const { db, key } = services;
  const id = await subscriptionId(key.id, deliveryUrl(services, request.delivery.url), name, canonical);
  const deleted = await db
    .delete(webhooks)
    .where(and(eq(webhooks.id, id), eq(webhooks.accountId, key.accountId), eq(webhooks.source, "mcp")))
    .returning({ id: webhooks.id });
  if (deleted.length === 0)
    throw new EventsError(NOT_FOUND, "This key has no subscription to that name, arguments and delivery.url.", { kind: "subscription" });
  return {};
}

/**
 * The extension's endpoint verification: before the first delivery to a (key, url), a signed `verification` POST
 * (headed like a delivery) whose `challenge` the endpoint must echo in a 2xx JSON body. Else -32015 with the failure's
 * category only (never the endpoint's answer).
 */
async function verifyEndpoint({ url, id, secret }: { url: string; id: string; secret: string }): Promise<void> {
  const challenge = newId("chl").slice(4);
  const body = JSON.stringify({ type: "verification", challenge });
  const headers = {
    ...(await signedHeaders([secret], {
      id: `msg_verification_${newId("m").slice(2)}`,
      timestampSeconds: Math.floor(Date.now() / 1000),
      body,
    })),
    "content-type": "application/json",
    "user-agent": USER_AGENT,
    [MCP_SUBSCRIPTION_HEADER]: id,
  };
  const failed = (reason: string) =>
    new EventsError(CALLBACK_ENDPOINT_ERROR, `The endpoint did not confirm the subscription (${reason}); it must echo the challenge.`, {
      reason,
    });
  let response: Response;
  try {
    response = await fetch(url, { method: "POST", headers, body, redirect: "manual", signal: AbortSignal.timeout(VERIFY_TIMEOUT_MS) });
  } catch (error) {
    throw failed(error instanceof Error && error.name === "TimeoutError" ? "timeout" : "connection_refused");
  }
  if (response.status >= 500) throw failed("http_5xx");
  if (response.status >= 400) throw failed("http_4xx");
  const echoed = await response
    .json()
    .then((answer) => (answer as { challenge?: unknown } | null)?.challenge)
    .catch(() => undefined);
  const encoder = new TextEncoder();
  const [given, expected] = [encoder.encode(typeof echoed === "string" ? echoed : ""), encoder.encode(challenge)];
  if (!response.ok || given.byteLength !== expected.byteLength || !crypto.subtle.timingSafeEqual(given, expected))
    throw failed("challenge_failed");
}

/** The cron's sweep: lapsed subscriptions deleted (with their delivery records), at most SWEEP_BATCH a run. */
export async function sweepLapsedSubscriptions(db: Database): Promise<number> {
  const deleted = await db.run(sql`DELETE FROM ${webhooks} WHERE id IN (SELECT id FROM ${webhooks}
    WHERE expires_at < ${new Date().toISOString()} ORDER BY expires_at LIMIT ${SWEEP_BATCH})`);
  return deleted.meta.changes;
}
