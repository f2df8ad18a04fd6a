import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { EventMessage, WebhookMessage } from "../../src/events/messages.ts";
import { newId } from "../../src/platform/ids.ts";
import type { AccountBudget } from "../../src/rate-limit/account-budgets.ts";
import { bucketName } from "../../src/rate-limit/buckets.ts";
import { call, expectJson } from "../helpers/http.ts";
import { testAccount } from "../helpers/sandbox.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, runQueue, spyOnDeliveryQueues } from "../helpers/webhooks.ts";

/**
 * The per-account budgets of test mode and replay (contract, fifth wave, "Per-account budgets"): 10,000 sandbox changes
 * a day, 2 test webhooks, 600 test deliveries a minute, 20,000 replayed deliveries an hour. A budget's count is seeded
 * through the account's own object (the same `take` the routes call), so reaching 10,000 or 20,000 costs one call.
 */

let receiver: Receiver;
beforeAll(() => {
  receiver = installReceiver();
});
afterAll(() => vi.restoreAllMocks());

/** Uses `amount` of the account's budget, as its routes would. */
async function use(accountId: string, budget: AccountBudget, amount: number) {
  const object = env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName(bucketName("account", accountId)));
  expect((await object.take(budget, amount, true)).granted).toBe(amount);
}

/**
 * `count` observations, one per sandbox product, each a new price and the other stock state of its first offer: two
 * events each (price.changed and stock.changed).
 */
async function sandboxObservations(testKey: string, count: number) {
  const { products } = await expectJson(await call("GET", "/products", { token: testKey }), 200);
  expect(products.length).toBeGreaterThanOrEqual(count);
  return products.slice(0, count).map((product) => {
    const offer = product.offers[0]!;
    const cents = 100 + Math.round(Math.random() * 1e6);
    return {
      sku: product.sku,
      name: product.name,
      competitor: { id: offer.competitor_id, name: offer.competitor_name },
      price: offer.currency === "JPY" ? String(cents) : (cents / 100).toFixed(2),
      currency: offer.currency,
      in_stock: !offer.in_stock,
    };
  });
}

const simulateObservations = (testKey: string, observations: unknown[]) =>
  call("POST", "/test/observations", { token: testKey, body: { observations } });

describe("sandbox changes: 10,000 a day per account", () => {
  it("the 10,001st is 429 naming the budget and when it refills, and a batch past the budget writes nothing", async () => {
    const { sub, testKey } = await testAccount();
    await use(sub, "sandbox-changes", 9_950);
    const observations = await sandboxObservations(testKey, 51);
    const feed = async () => (await expectJson(await call("GET", "/events?limit=1000", { token: testKey }), 200)).events;

    // 9,950 + 51: refused whole, nothing written.
    const refused = await simulateObservations(testKey, observations);
    const { detail } = await expectJson(refused, 429);
    expect(detail).toMatch(/10,000 sandbox changes per day/);
    expect(detail).toMatch(/9,950 used, and 51 more would pass it, so nothing was done/);
    const retryAfter = Number(refused.headers.get("Retry-After"));
    expect(retryAfter).toBeGreaterThan(23 * 3600);
    expect(retryAfter).toBeLessThanOrEqual(24 * 3600 + 15 * 60);
    expect(await feed()).toEqual([]);

    // 50 fit exactly (the 10,000th change); the 10,001st does not.
    const answer = await expectJson(await simulateObservations(testKey, observations.slice(0, 50)), 200);
    expect(answer.price_changes).toBe(50);
    const last = await simulateObservations(testKey, observations.slice(50));
    expect((await expectJson(last, 429)).detail).toMatch(
      /10,000 sandbox changes per day per account.*10,000 used, and 1 more would pass it/,
    );
    expect(await feed()).toHaveLength(100); // the 50 accepted changes' price and stock events, and no more
  });
});

describe("test webhooks: 2 per account", () => {
  it("the 3rd is 400 naming the limit; live webhooks are not held to it", async () => {
    const { token } = await testAccount();
    await createWebhook(token, { url: hookUrl(), environment: "test" });
    await createWebhook(token, { url: hookUrl(), environment: "test" });
    const third = await call("POST", "/webhooks", { token, body: { url: hookUrl(), environment: "test" } });
    expect((await expectJson(third, 400)).detail).toMatch(/^Invalid body: environment: this account already has 2 test webhooks/);
    await createWebhook(token, { url: hookUrl() });
    const { webhooks } = await expectJson(await call("GET", "/webhooks", { token }), 200);
    expect(webhooks.map((webhook) => webhook.environment).sort()).toEqual(["live", "test", "test"]);
  });
});

describe("test deliveries: 600 a minute per account", () => {
  it("800 deliveries' worth of sandbox changes within a minute make 600 signed POSTs; the answer says what was held back", async () => {
    const { token, testKey } = await testAccount();
    const urls = [hookUrl("budget-a"), hookUrl("budget-b")];
    for (const url of urls) await createWebhook(token, { url, environment: "test" });
    const observations = await sandboxObservations(testKey, 100);
    const posts = () => urls.reduce((sum, url) => sum + receiver.to(url).length, 0);

    // 100 observations: 200 events, to 2 webhooks each; twice within the minute.
    const first = await expectJson(await simulateObservations(testKey, observations), 200);
    const again = observations.map((o) => ({ ...o, price: o.currency === "JPY" ? "990" : "9.90", in_stock: !o.in_stock }));
    const before = Date.now();
    const second = await expectJson(await simulateObservations(testKey, again), 200);

    await vi.waitFor(() => expect(posts()).toBeGreaterThanOrEqual(600), { timeout: 15_000, interval: 50 });
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // nothing more comes
    expect(posts()).toBe(600);
    expect(first.test_deliveries).toEqual({ queued: 400, held_back: 0, budget: "600 test deliveries per minute", refills_at: null });
    expect(second.test_deliveries).toMatchObject({ queued: 200, held_back: 200, budget: "600 test deliveries per minute" });
    const refillsIn = Date.parse(second.test_deliveries!.refills_at!) - before;
    expect(refillsIn).toBeGreaterThan(50_000);
    expect(refillsIn).toBeLessThanOrEqual(62_000);
    // Nothing is lost: every change's event is in the feed.
    const { events } = await expectJson(await call("GET", "/events?limit=1000", { token: testKey }), 200);
    expect(events).toHaveLength(400);
  });
  it("a sandbox event on the queue is acked unsent: it is in no outbox, so only its call's own fan-out delivers it", async () => {
    const { sub, token } = await testAccount();
    await createWebhook(token, { url: hookUrl(), environment: "test" });
    const messages = Array.from({ length: 4 }, (): EventMessage => {
      const id = newId("evt");
      return {
        kind: "event",
        event: { id, type: "price.changed", timestamp: new Date().toISOString(), data: { event_id: id, sku: "TEST-CF-0001" } },
        price_change: { old_minor: 1000, new_minor: 900 },
        sandbox_account_id: sub,
      };
    });
    const queues = spyOnDeliveryQueues();
    for (const spy of queues.spies) spy.mockResolvedValue({} as QueueSendBatchResponse);
    try {
      const batch = await runQueue(messages);
      expect(batch.explicitAcks).toEqual(batch.ids);
      expect(queues.sent()).toEqual([]);
    } finally {
      queues.restore();
    }
  });
});

describe("replayed deliveries: 20,000 an hour per account", () => {
  it("a replay past the budget queues the oldest it has room for and says how many were held back, and until when", async () => {
    const { sub, token, testKey } = await testAccount();
    const url = hookUrl("replayed");
    const hook = await createWebhook(token, { url, environment: "test" });
    const since = new Date(Date.now() - 1000).toISOString();
    await expectJson(await simulateObservations(testKey, await sandboxObservations(testKey, 8)), 200); // 16 events
    await settled(() => expect(receiver.to(url)).toHaveLength(16), 20); // their first deliveries
    await use(sub, "replayed-deliveries", 19_990);
    const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    try {
      const before = Date.now();
      const replay = () => call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since } });
      const answer = await expectJson(await replay(), 202);
      expect(answer).toMatchObject({ queued: 10, held_back: 6, budget: "20,000 replayed deliveries per hour" });
      const refillsIn = Date.parse(answer.refills_at!) - before;
      expect(refillsIn).toBeGreaterThan(59 * 60_000);
      expect(refillsIn).toBeLessThanOrEqual(61 * 60_000);
      const queued = sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => (m.body as WebhookMessage).event.id));
      const { events } = await expectJson(await call("GET", "/events?limit=1000", { token: testKey }), 200);
      expect(events).toHaveLength(16); // every event stays in the feed
      expect(queued).toEqual(events.slice(0, 10).map((event) => event.id)); // the feed is oldest first
      // The budget is spent: the same replay now holds back all 16.
      expect(await expectJson(await replay(), 202)).toMatchObject({ queued: 0, held_back: 16 });
      expect(sent.mock.calls.flatMap(([batch]) => [...batch])).toHaveLength(10);
    } finally {
      sent.mockRestore();
    }
  });
});
