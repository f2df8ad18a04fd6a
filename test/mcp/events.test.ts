import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { and, eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { DeliveryMessage } from "../../src/events/messages.ts";
import { eventMessageOf } from "../../src/events/outbox.ts";
import { MAX_SUBSCRIPTIONS_PER_ACCOUNT, sweepLapsedSubscriptions } from "../../src/mcp/events/service.ts";
import { database } from "../../src/platform/db.ts";
import { newId } from "../../src/platform/ids.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { events, webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { ACCOUNT_BUDGETS, type AccountBudget } from "../../src/rate-limit/account-budgets.ts";
import type { RateLimitBucket } from "../../src/rate-limit/bucket.ts";
import { bucketName } from "../../src/rate-limit/buckets.ts";
import { fanOut } from "../../src/webhooks/delivery/rows.ts";
import { generateWebhookSecret } from "../../src/webhooks/secrets.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { eventsCall, mcpClient, postMcp } from "../helpers/mcp.ts";
import { testAccount } from "../helpers/sandbox.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, ingest, runQueue } from "../helpers/webhooks.ts";

/**
 * The MCP events extension on /mcp (src/mcp/events/), through workerd with the real D1, queues and objects: the SDK's
 * own client subscribes; an ingestion moves a price; the signed delivery reaches the receiver (the worker's outbound
 * fetch is answered inside the isolate: test/helpers/webhook-receiver.ts, the one thing beyond this machine).
 */

const db = () => database(env.DB);
let receiver: Receiver;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(async () => {
  vi.useRealTimers();
  receiver.assertNoStrayRequests();
  await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.status, "enabled"));
});
afterAll(() => vi.restoreAllMocks());

const SONY_BELOW_280 = { brands: ["Sony"], currency: "USD", price_below: "280.00" };

let skus = 0;
const newSku = () => `MCPEV-${Date.now()}-${++skus}`;

/** A Sony headphone at 300.00, then moved to `to`: returns its SKU. */
async function sonyMoves(to: string, { brand = "Sony", sku = newSku() } = {}) {
  await ingest([{ sku, brand, price: "300.00" }]);
  await ingest([{ sku, brand, price: to }]);
  return sku;
}

/** The POSTs a URL got that were deliveries (not the verification). */
const deliveriesTo = (url: string) => receiver.to(url).filter((request) => !request.body.includes('"type":"verification"'));

async function subscribed(key: string, args: Record<string, unknown> = SONY_BELOW_280, extra: Record<string, unknown> = {}) {
  const client = await mcpClient(key);
  const url = hookUrl("mcp");
  const secret = generateWebhookSecret();
  const params = { name: "price.changed", arguments: args, delivery: { mode: "webhook", url, secret }, ...extra };
  const answer = await eventsCall(client, "events/subscribe", params);
  return { client, url, secret, params, answer, id: answer.id as string };
}

/** The JSON-RPC error a call answered (the SDK client throws it as McpError). */
async function refusal(promise: Promise<unknown>): Promise<{ code: number; message: string; data: unknown }> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error, String(error)).toBeInstanceOf(McpError);
  const { code, message, data } = error as McpError;
  return { code, message, data };
}

const quietFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The account's budgets' object (src/rate-limit/bucket.ts), and what one of them has used (asking for nothing). */
const budgetOf = (accountId: string) => env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName(bucketName("account", accountId)));
const budgetUsed = async (accountId: string, budget: AccountBudget) => (await budgetOf(accountId).take(budget, 0, false)).used;

describe("initialize and events/list", () => {
  it("initialize advertises capabilities.events; events/list offers price.changed and stock.changed by poll and webhook", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const res = await postMcp(key, {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    });
    const init = (await res.json()) as { result: { capabilities: Record<string, unknown> } };
    expect(init.result.capabilities.events).toEqual({ listChanged: false });

    const list = (await (await postMcp(key, { jsonrpc: "2.0", id: 2, method: "events/list" })).json()) as {
      result: {
        events: { name: string; delivery: string[]; inputSchema: { properties: Record<string, unknown> }; payloadSchema: unknown }[];
      };
    };
    expect(list.result.events.map((event) => [event.name, event.delivery])).toEqual([
      ["price.changed", ["poll", "webhook"]],
      ["stock.changed", ["poll", "webhook"]],
    ]);
    // The payload's schema is GET /events' data of that type (its named component, under $defs).
    const [price, stock] = list.result.events.map((event) => JSON.stringify(event.payloadSchema));
    expect(price).toContain('"new_price"');
    expect(stock).toContain('"in_stock_before"');
    expect(Object.keys(list.result.events[0]!.inputSchema.properties)).toEqual(
      expect.arrayContaining([
        "competitors",
        "brands",
        "skus",
        "price_below",
        "new_low_days",
        "below_lowest_30d",
        "compare",
        "min_change_pct",
      ]),
    );
  });
});

describe("events/subscribe refuses what the extension says it must", () => {
  it("a secret that is not whsec_ and base64 of 24 to 64 bytes is -32602, and so are an http:// URL and bad arguments; an unknown name is -32011, push -32014", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const client = await mcpClient(key);
    const url = hookUrl("refused");
    const subscribe = (params: Record<string, unknown>) =>
      refusal(eventsCall(client, "events/subscribe", { name: "price.changed", arguments: {}, ...params }));
    for (const secret of ["not-a-secret", "whsec_c2hvcnQ=", `whsec_${btoa("x".repeat(65))}`]) {
      const refused = await subscribe({ delivery: { url, secret } });
      expect(refused.code, secret).toBe(-32602);
      expect(refused.message).toContain("delivery.secret");
    }
    const secret = generateWebhookSecret();
    expect(await subscribe({ delivery: { url: "http://example.com/hook", secret } })).toMatchObject({ code: -32602 });
    expect(await subscribe({ delivery: { url: "https://10.0.0.1/hook", secret } })).toMatchObject({ code: -32602 });
    const badArgs = await subscribe({ arguments: { brands: "Sony" }, delivery: { url, secret } });
    expect(badArgs).toMatchObject({ code: -32602 });
    expect(badArgs.message).toContain("brands");
    expect(await subscribe({ arguments: { price_below: "280.00" }, delivery: { url, secret } })).toMatchObject({ code: -32602 });
    expect(
      await refusal(eventsCall(client, "events/subscribe", { name: "price.exploded", arguments: {}, delivery: { url, secret } })),
    ).toMatchObject({ code: -32011, data: { kind: "event" } });
    expect(await subscribe({ delivery: { mode: "push", url, secret } })).toMatchObject({
      code: -32014,
      data: { feature: "deliveryMode", value: "push" },
    });
    // Nothing was sent for any of them, not even a verification.
    expect(receiver.to(url)).toEqual([]);
  });

  it("an endpoint that does not echo the challenge is -32015 challenge_failed, and nothing is stored", async () => {
    const { key, sub } = await freshAccount({ plan: "premium" });
    const client = await mcpClient(key);
    const url = hookUrl("no-echo");
    receiver.respond(url, () => new Response("ok"));
    const refused = await refusal(
      eventsCall(client, "events/subscribe", {
        name: "price.changed",
        arguments: {},
        delivery: { url, secret: generateWebhookSecret() },
      }),
    );
    expect(refused).toMatchObject({ code: -32015, data: { reason: "challenge_failed" } });
    expect(await db().select().from(webhooks).where(eq(webhooks.accountId, sub))).toEqual([]);
  });
});

describe("a subscription's deliveries", () => {
  it("brand Sony below 280.00: the verification first, then one signed delivery with X-MCP-Subscription-Id that standardwebhooks verifies; other changes send nothing", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const { url, secret, id, answer } = await subscribed(key);
    expect(id).toMatch(/^sub_[0-9a-f]{32}$/);
    expect(answer).toMatchObject({ truncated: false, cursor: expect.stringMatching(/^evt_/) });
    expect(Date.parse(answer.refreshBefore as string) - Date.now()).toBeGreaterThan(59 * 60_000);
    const [verification] = receiver.to(url);
    expect(verification!.headers["x-mcp-subscription-id"]).toBe(id);
    expect(verifyWithLibrary(secret, verification!)).toMatchObject({ type: "verification" });

    await sonyMoves("290.00"); // not below 280.00
    await sonyMoves("279.00", { brand: "Bose" }); // not Sony
    const sku = await sonyMoves("279.00");
    await settled(() => expect(deliveriesTo(url)).toHaveLength(1), 20);
    const [delivery] = deliveriesTo(url);
    expect(delivery!.headers["x-mcp-subscription-id"]).toBe(id);
    const body = verifyWithLibrary(secret, delivery!) as Record<string, unknown>;
    expect(body).toMatchObject({
      eventId: delivery!.headers["webhook-id"],
      name: "price.changed",
      cursor: delivery!.headers["webhook-id"],
      data: { sku, old_price: "300.00", new_price: "279.00" },
    });
    await quietFor(300);
    expect(deliveriesTo(url)).toHaveLength(1);
  });

  it("subscribing again with the same params refreshes: the same id, a later refreshBefore, no second verification; a new secret signs from then on", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const { client, url, params, answer, id } = await subscribed(key, SONY_BELOW_280, { ttlMs: 120_000 });
    const first = Date.parse(answer.refreshBefore as string);
    expect(first - Date.now()).toBeLessThanOrEqual(120_000);
    await quietFor(20);
    const secret = generateWebhookSecret();
    const again = await eventsCall(client, "events/subscribe", {
      ...params,
      delivery: { ...params.delivery, secret },
      ttlMs: 600_000,
    });
    expect(again.id).toBe(id);
    expect(Date.parse(again.refreshBefore as string)).toBeGreaterThan(first);
    expect(again.deliveryStatus).toEqual({ active: true });
    const [row] = await db().select().from(webhooks).where(eq(webhooks.id, id));
    expect(row!.expiresAt).toBe(again.refreshBefore);
    expect(receiver.to(url)).toHaveLength(1); // the one verification

    await sonyMoves("250.00");
    await settled(() => expect(deliveriesTo(url)).toHaveLength(1), 20);
    expect(verifyWithLibrary(secret, deliveriesTo(url)[0]!)).toMatchObject({ name: "price.changed" });
  });

  it("a lapsed subscription (its TTL passed without a refresh) sends nothing, and the fan-out does not pick it", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const { url, id } = await subscribed(key, SONY_BELOW_280, { ttlMs: 60_000 });
    const sku = newSku();
    await ingest([{ sku, brand: "Sony", price: "300.00" }]);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 61_000);
    await ingest([{ sku, brand: "Sony", price: "200.00" }]);
    const [stored] = await db()
      .select()
      .from(events)
      .where(and(eq(events.type, "price.changed"), sql`${events.payload} ->> '$.data.sku' = ${sku}`));
    const deliveries = await fanOut({ db: db(), alerts: database(env.ALERTS_DB), sandboxFacts: () => undefined as never }, [
      eventMessageOf(stored!),
    ]);
    expect(deliveries.map((delivery) => delivery.webhook_id)).not.toContain(id);
    await quietFor(500);
    expect(deliveriesTo(url)).toEqual([]);
    // The cron's sweep then deletes it (its delivery records with it).
    expect(await sweepLapsedSubscriptions(db())).toBeGreaterThanOrEqual(1);
    expect(await db().select().from(webhooks).where(eq(webhooks.id, id))).toEqual([]);
  });

  it("a subscription ends with its key: once the key is revoked, its next event is a signed terminated envelope (-32012), sent once, and the subscription is disabled", async () => {
    const account = await freshAccount({ plan: "premium" });
    const { url, secret, id } = await subscribed(account.key);
    expect((await call("DELETE", `/api-keys/${account.keyId}`, { token: account.token })).status).toBe(200);
    await sonyMoves("260.00");
    await settled(() => expect(deliveriesTo(url)).toHaveLength(1), 20);
    const [ended] = deliveriesTo(url);
    expect(ended!.headers["x-mcp-subscription-id"]).toBe(id);
    expect(ended!.headers["webhook-id"]).toMatch(/^msg_terminated_[0-9a-f]{32}$/);
    expect(verifyWithLibrary(secret, ended!)).toEqual({
      type: "terminated",
      error: { code: -32012, message: "Forbidden", data: { reason: expect.stringContaining("revoked") } },
    });
    const [row] = await db().select().from(webhooks).where(eq(webhooks.id, id));
    expect(row).toMatchObject({ status: "disabled", disabledReason: expect.stringContaining("Terminated") });
    // Ended: the next move sends nothing, not even another terminated.
    await sonyMoves("250.00");
    await quietFor(500);
    expect(deliveriesTo(url)).toHaveLength(1);
  });

  it("a 413 from the endpoint is final for that event (the extension's rule): recorded failed and not retried; a webhook's 413 is still retried", async () => {
    const account = await freshAccount({ plan: "premium" });
    const { url, id } = await subscribed(account.key);
    receiver.respond(url, () => new Response("too large", { status: 413 }));
    const hook = await createWebhook(account.token, { url: hookUrl("plain-413"), events: ["price.changed"] });
    receiver.respond(hook.url, () => new Response("too large", { status: 413 }));
    const result = await runQueue([deliveryTo(id), deliveryTo(hook.id)]);
    expect(result.retryMessages.map((retry) => retry.msgId)).toEqual([result.ids[1]]);
    const outcomes = await db()
      .select({ webhookId: webhookDeliveries.webhookId, outcome: webhookDeliveries.outcome, statusCode: webhookDeliveries.statusCode })
      .from(webhookDeliveries)
      .where(sql`${webhookDeliveries.webhookId} IN (${id}, ${hook.id})`);
    expect(outcomes).toEqual(
      expect.arrayContaining([
        { webhookId: id, outcome: "failed", statusCode: 413 },
        { webhookId: hook.id, outcome: "retrying", statusCode: 413 },
      ]),
    );
  });

  it("events/unsubscribe ends it: nothing more arrives; a second unsubscribe is -32011", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const { client, url, params, id } = await subscribed(key);
    const unsubscribe = { name: params.name, arguments: params.arguments, delivery: { url } };
    expect(await eventsCall(client, "events/unsubscribe", unsubscribe)).toEqual({});
    expect(await db().select().from(webhooks).where(eq(webhooks.id, id))).toEqual([]);
    await sonyMoves("100.00");
    await quietFor(500);
    expect(deliveriesTo(url)).toEqual([]);
    expect(await refusal(eventsCall(client, "events/unsubscribe", unsubscribe))).toMatchObject({
      code: -32011,
      data: { kind: "subscription" },
    });
  });
});

describe("replay from a cursor", () => {
  it("a new subscription given a feed cursor is sent the matching events after it (POST /webhooks/{id}/replay's path), signed and headed like any delivery", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const client = await mcpClient(key);
    const { cursor } = await eventsCall(client, "events/poll", { name: "price.changed", arguments: {}, cursor: null });
    await sonyMoves("279.00", { brand: "Bose" });
    const sku = await sonyMoves("265.00");
    // What the replay queues is caught here and delivered by the consumer (the real queue would, after this test).
    const replayed: DeliveryMessage[] = [];
    const queued = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockImplementation(async (messages) => {
      replayed.push(...[...messages].map((message) => message.body as DeliveryMessage));
      return {} as QueueSendBatchResponse;
    });
    let sub: Awaited<ReturnType<typeof subscribed>>;
    try {
      sub = await subscribed(key, SONY_BELOW_280, { cursor });
    } finally {
      queued.mockRestore();
    }
    expect(sub.answer).toMatchObject({ cursor, truncated: false });
    // From the cursor's instant: the cursor's own event may come again (a Sony change of an earlier test), receivers drop repeats.
    const after = replayed.filter((message) => message.event.id !== cursor);
    expect(after.map((message) => [message.webhook_id, message.event.data.sku])).toEqual([[sub.id, sku]]);
    await runQueue(after);
    const [delivery] = deliveriesTo(sub.url);
    expect(delivery!.headers["x-mcp-subscription-id"]).toBe(sub.id);
    expect(verifyWithLibrary(sub.secret, delivery!)).toMatchObject({ name: "price.changed", data: { sku, new_price: "265.00" } });
  });
});

describe("events/poll", () => {
  it("a null cursor is now; the next poll returns the matching events after it, as EventOccurrences, and a cursor past them", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const client = await mcpClient(key);
    const poll = (cursor: string | null) =>
      eventsCall(client, "events/poll", { name: "price.changed", arguments: SONY_BELOW_280, cursor, maxEvents: 10 });
    const start = await poll(null);
    expect(start).toMatchObject({ events: [], truncated: false, hasMore: false, nextPollMs: expect.any(Number) });
    await sonyMoves("279.00", { brand: "Bose" });
    const sku = await sonyMoves("275.00");
    const page = await poll(start.cursor as string);
    expect(page.events).toEqual([
      {
        eventId: expect.stringMatching(/^evt_/),
        name: "price.changed",
        timestamp: expect.any(String),
        data: expect.objectContaining({ sku, new_price: "275.00" }),
      },
    ]);
    expect(page).toMatchObject({ truncated: false, hasMore: false });
    expect(page.cursor).not.toBe(start.cursor);
    expect((await poll(page.cursor as string)).events).toEqual([]);
  });
});

describe("the account's webhooks list", () => {
  it("shows the subscription with source mcp and its expires_at; DELETE /webhooks/{id} ends it; another account sees nothing of it and cannot end it", async () => {
    const owner = await freshAccount({ plan: "premium" });
    const { client, url, params, id, answer } = await subscribed(owner.key);
    const { webhooks: listed } = await expectJson(await call("GET", "/webhooks", { token: owner.token }), 200);
    expect(listed).toEqual([
      expect.objectContaining({ id, url, source: "mcp", expires_at: answer.refreshBefore, status: "enabled", events: ["price.changed"] }),
    ]);
    expect(listed[0]!.filters).toEqual(SONY_BELOW_280);

    // What it listens for and where it delivers make its id: PATCH may not change them (a description, or status, it may).
    const patched = await call("PATCH", `/webhooks/${id}`, { token: owner.token, body: { filters: { brands: ["Bose"] } } });
    expect(patched.status).toBe(400);
    expect((await patched.json<{ detail: string }>()).detail).toContain("filters");
    expect((await call("PATCH", `/webhooks/${id}`, { token: owner.token, body: { description: "my agent" } })).status).toBe(200);
    // Its secret is its client's: the server does not make it one.
    expect((await call("POST", `/webhooks/${id}/rotate-secret`, { token: owner.token, body: {} })).status).toBe(409);

    const other = await freshAccount({ plan: "premium" });
    expect((await expectJson(await call("GET", "/webhooks", { token: other.token }), 200)).webhooks).toEqual([]);
    expect((await call("GET", `/webhooks/${id}`, { token: other.token })).status).toBe(404);
    expect((await call("DELETE", `/webhooks/${id}`, { token: other.token })).status).toBe(404);
    const otherClient = await mcpClient(other.key);
    expect(
      await refusal(eventsCall(otherClient, "events/unsubscribe", { name: params.name, arguments: params.arguments, delivery: { url } })),
    ).toMatchObject({ code: -32011 });
    expect(await db().select({ id: webhooks.id }).from(webhooks).where(eq(webhooks.id, id))).toEqual([{ id }]);

    expect((await call("DELETE", `/webhooks/${id}`, { token: owner.token })).status).toBe(204);
    await sonyMoves("200.00");
    await quietFor(500);
    expect(deliveriesTo(url)).toEqual([]);
    expect(
      await refusal(eventsCall(client, "events/unsubscribe", { name: params.name, arguments: params.arguments, delivery: { url } })),
    ).toMatchObject({ code: -32011 });
  });
});

describe("environments", () => {
  it("a test key's subscription hears its account's sandbox events only (in the test-delivery budget); the live key's beside it hears no sandbox event (in the subscription budget)", async () => {
    const account = await testAccount();
    const sku = "TEST-MN-0003";
    const test = await subscribed(account.testKey, { skus: [sku] });
    const live = await subscribed(account.key, { skus: [sku] });
    const [row] = await db().select().from(webhooks).where(eq(webhooks.id, test.id));
    expect(row).toMatchObject({ environment: "test", source: "mcp", apiKeyId: account.testKeyId });

    // A live change of that SKU: the live subscription only.
    await ingest([{ sku, price: "10.00" }]);
    await ingest([{ sku, price: "9.00" }]);
    await settled(() => expect(deliveriesTo(live.url)).toHaveLength(1), 20);
    expect(await budgetUsed(account.sub, "subscription-deliveries")).toBe(1);

    // A sandbox change of that SKU: the test subscription only, counted in the test-delivery budget.
    const { products } = await expectJson(await call("GET", `/products?sku=${sku}`, { token: account.testKey }), 200);
    const offer = products[0]!.offers[0]!;
    const observation = { sku, name: "x", competitor: { id: offer.competitor_id, name: "x" }, price: "1", currency: offer.currency };
    await expectJson(
      await call("POST", "/test/observations", { token: account.testKey, body: { observations: [{ ...observation, in_stock: true }] } }),
      200,
    );
    await settled(() => expect(deliveriesTo(test.url)).toHaveLength(1), 20);
    const body = verifyWithLibrary(test.secret, deliveriesTo(test.url)[0]!) as { data: { sku: string } };
    expect(body.data.sku).toBe(sku);
    await quietFor(300);
    expect(deliveriesTo(live.url)).toHaveLength(1);
    expect(deliveriesTo(test.url)).toHaveLength(1);
    expect(await budgetUsed(account.sub, "subscription-deliveries")).toBe(1);
    expect(await budgetUsed(account.sub, "test-deliveries")).toBeGreaterThanOrEqual(1);
  });
});

describe("the account's cap", () => {
  it(`an account holding ${MAX_SUBSCRIPTIONS_PER_ACCOUNT} subscriptions gets -32013 for another; a refresh of one it holds still works`, async () => {
    const account = await freshAccount({ plan: "premium" });
    const first = await subscribed(account.key);
    await holdSubscriptions(account, MAX_SUBSCRIPTIONS_PER_ACCOUNT - 1);
    const client = await mcpClient(account.key);
    const refused = await refusal(
      eventsCall(client, "events/subscribe", { ...first.params, arguments: { brands: ["Bose"] }, delivery: first.params.delivery }),
    );
    expect(refused).toMatchObject({ code: -32013, data: { limit: "subscriptions", max: MAX_SUBSCRIPTIONS_PER_ACCOUNT } });
    expect((await eventsCall(client, "events/subscribe", first.params)).id).toBe(first.id);
  });
});

/** `count` live subscriptions of the account's key, as events/subscribe writes them, each to SKUs of its own. */
async function holdSubscriptions(account: { sub: string; keyId: string }, count: number) {
  const rows = Array.from({ length: count }, (_, i) => ({
    id: `sub_${newId("x").slice(2)}`,
    filters: JSON.stringify({ skus: [`A-${i}-${newSku()}`] }),
  }));
  await env.DB.prepare(
    `INSERT INTO webhooks (id, account_id, url, events, min_change_bp, filters, status, secret_ciphertext, created_at, environment,
      source, expires_at, api_key_id)
     SELECT r.value ->> 'id', ?1, 'https://hooks.test/a', '["price.changed"]', 0, r.value ->> 'filters', 'enabled', 'v1.x.y', ?2,
       'live', 'mcp', ?3, ?4 FROM json_each(?5) r`,
  )
    .bind(account.sub, new Date().toISOString(), new Date(Date.now() + 3_600_000).toISOString(), account.keyId, JSON.stringify(rows))
    .run();
}

describe("no account's subscriptions slow another's", () => {
  it("B's delivery costs the same D1 work beside A's 1,000 subscriptions as alone", async () => {
    const a = await freshAccount({ plan: "premium" });
    const b = await freshAccount({ plan: "premium" });
    const { id } = await subscribed(b.key);
    const sku = await sonyMoves("270.00");
    const [stored] = await db()
      .select()
      .from(events)
      .where(and(eq(events.type, "price.changed"), sql`${events.payload} ->> '$.data.sku' = ${sku}`));
    const message = eventMessageOf(stored!);
    const measure = async () => {
      const work = new WorkMeter();
      const deliveries = await fanOut(
        { db: work.database(env.DB), alerts: work.database(env.ALERTS_DB), sandboxFacts: () => undefined as never },
        [message],
      );
      return { to: deliveries.map((delivery) => delivery.webhook_id), rowsRead: work.d1RowsRead, statements: work.d1Statements };
    };
    const alone = await measure();
    expect(alone.to).toContain(id);

    // A's 1,000 subscriptions, as its key's events/subscribe writes them: each to SKUs of its own, live, enabled, unexpired.
    await holdSubscriptions(a, MAX_SUBSCRIPTIONS_PER_ACCOUNT);
    const beside = await measure();
    expect(beside).toEqual(alone);
  });
});

describe("the account's subscription-delivery budget", () => {
  const SUBSCRIPTION_BUDGET = ACCOUNT_BUDGETS["subscription-deliveries"].limit;
  /** Uses `amount` of the account's subscription deliveries, as that many deliveries would have. */
  const use = async (accountId: string, amount: number) =>
    expect((await budgetOf(accountId).take("subscription-deliveries", amount, true)).granted).toBe(amount);
  const usedBy = (accountId: string) => budgetUsed(accountId, "subscription-deliveries");
  /** An hour passes for the account's budgets: their slots moved back past the window, in the object's storage and memory. */
  const anHourPasses = (accountId: string) =>
    runInDurableObject(budgetOf(accountId), (bucket: RateLimitBucket, state) => {
      const rows = state.storage.sql.exec<{ name: string; slots: string }>("SELECT name, slots FROM budget").toArray();
      for (const { name, slots } of rows) {
        const aged = (JSON.parse(slots) as [number, number][]).map(([start, count]) => [start - 61 * 60_000, count]);
        state.storage.sql.exec("UPDATE budget SET slots = ? WHERE name = ?", JSON.stringify(aged), name);
      }
      (bucket as unknown as { budgets: unknown }).budgets = undefined; // read again from storage
    });
  const gapOf = async (id: string) => (await db().select({ gap: webhooks.gapCursor }).from(webhooks).where(eq(webhooks.id, id)))[0]!.gap;
  const eventOf = async (sku: string) =>
    (
      await db()
        .select({ id: events.id })
        .from(events)
        .where(and(eq(events.type, "price.changed"), sql`${events.payload} ->> '$.data.sku' = ${sku}`))
    )[0]!.id;

  it("live deliveries count in it; past it they are held back and the subscription's next delivery with room is a gap envelope carrying the last one held back", async () => {
    const a = await freshAccount({ plan: "premium" });
    const { url, secret, id } = await subscribed(a.key);
    await use(a.sub, SUBSCRIPTION_BUDGET - 1);
    await sonyMoves("279.00");
    await settled(() => expect(deliveriesTo(url)).toHaveLength(1), 20);
    expect(await usedBy(a.sub)).toBe(SUBSCRIPTION_BUDGET);

    // Exhausted: the next two moves are held back, and the later one is kept as the gap's cursor.
    await sonyMoves("270.00");
    const last = await eventOf(await sonyMoves("260.00"));
    await settled(async () => expect(await gapOf(id)).toBe(last), 20);
    await quietFor(300);
    expect(deliveriesTo(url)).toHaveLength(1);

    // An hour on, the budget has room: the gap first, then the event, both counted.
    await anHourPasses(a.sub);
    const sku = await sonyMoves("250.00");
    await settled(() => expect(deliveriesTo(url)).toHaveLength(3), 20);
    const [gap, event] = deliveriesTo(url)
      .slice(1)
      .sort((x, y) => (x.headers["webhook-id"]!.startsWith("msg_gap_") ? -1 : y.headers["webhook-id"]!.startsWith("msg_gap_") ? 1 : 0));
    expect(gap!.headers["webhook-id"]).toMatch(/^msg_gap_[0-9a-f]{32}$/);
    expect(gap!.headers["x-mcp-subscription-id"]).toBe(id);
    expect(verifyWithLibrary(secret, gap!)).toEqual({ type: "gap", cursor: last });
    expect(verifyWithLibrary(secret, event!)).toMatchObject({ name: "price.changed", data: { sku } });
    expect(await gapOf(id)).toBeNull();
    expect(await usedBy(a.sub)).toBe(2);
  });

  it("a gap still pending when the client refreshes is told there instead: truncated, with its cursor, and no envelope follows", async () => {
    const a = await freshAccount({ plan: "premium" });
    const { client, url, params, id } = await subscribed(a.key);
    await use(a.sub, SUBSCRIPTION_BUDGET);
    const held = await eventOf(await sonyMoves("279.00"));
    await settled(async () => expect(await gapOf(id)).toBe(held), 20);
    const refreshed = await eventsCall(client, "events/subscribe", params);
    expect(refreshed).toMatchObject({ id, truncated: true, cursor: held });
    expect(await gapOf(id)).toBeNull();
    expect(deliveriesTo(url)).toEqual([]);
  });

  it("the queue's fan-out (a bulk ingestion) counts in it too: an exhausted account's subscription gets nothing and keeps a gap; another's gets its event", async () => {
    const a = await freshAccount({ plan: "premium" });
    const b = await freshAccount({ plan: "premium" });
    const skusMoved = Array.from({ length: 101 }, () => newSku());
    const mine = await subscribed(a.key, { skus: skusMoved.slice(0, 50) });
    const theirs = await subscribed(b.key, { skus: [skusMoved[100]] });
    await use(a.sub, SUBSCRIPTION_BUDGET);
    await ingest(skusMoved.map((sku) => ({ sku, brand: "Sony", price: "300.00" })));
    await ingest(skusMoved.map((sku) => ({ sku, brand: "Sony", price: "250.00" }))); // 101 events: the queue's path
    await settled(() => expect(deliveriesTo(theirs.url)).toHaveLength(1), 50);
    const lastOfMine = (await Promise.all(skusMoved.slice(0, 50).map(eventOf))).sort().at(-1);
    await settled(async () => expect(await gapOf(mine.id)).toBe(lastOfMine), 50);
    expect(deliveriesTo(mine.url)).toEqual([]);
  });

  it("one account's exhausted budget holds back its own deliveries only: another's subscription to the same change gets its delivery, in its own budget", async () => {
    const a = await freshAccount({ plan: "premium" });
    const b = await freshAccount({ plan: "premium" });
    const mine = await subscribed(a.key);
    const theirs = await subscribed(b.key);
    await use(a.sub, SUBSCRIPTION_BUDGET);
    const started = Date.now();
    await sonyMoves("279.00");
    await settled(() => expect(deliveriesTo(theirs.url)).toHaveLength(1), 20);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(verifyWithLibrary(theirs.secret, deliveriesTo(theirs.url)[0]!)).toMatchObject({ name: "price.changed" });
    await quietFor(300);
    expect(deliveriesTo(mine.url)).toEqual([]);
    expect(await usedBy(b.sub)).toBe(1);
    expect(await usedBy(a.sub)).toBe(SUBSCRIPTION_BUDGET);
  });
});
