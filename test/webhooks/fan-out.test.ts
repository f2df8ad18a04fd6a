import { listDurableObjectIds } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { eq, like } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { meetsThreshold } from "../../src/alerts/rules.ts";
import type { DeliveryMessage, EventMessage, WebhookMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { newId } from "../../src/platform/ids.ts";
import { webhooks } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, rateLimitOf } from "../helpers/http.ts";
import { settled } from "../helpers/settle.ts";
import { HOOKS_ORIGIN, hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, ingest, runQueue, spyOnDeliveryQueues, storeEvents, testEvent } from "../helpers/webhooks.ts";

/** The objects admission uses: the keys' and the fixed buckets'. */
const rateLimitObjects = async () =>
  (await listDurableObjectIds(env.API_KEY_OBJECTS)).length + (await listDurableObjectIds(env.RATE_LIMIT_BUCKETS)).length;

/**
 * Fan-out: an "event" message becomes one "delivery" message per matching webhook, of any account.
 * The queue's sendBatch is watched (and, for these unit tests, not passed on), so each test sees
 * exactly the deliveries its event produced. The last test runs the whole path through the real queue.
 */

const db = () => database(env.DB);
let receiver: Receiver;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(async () => {
  receiver.assertNoStrayRequests();
  // Each test's webhooks stop here, so no later event in this file reaches them.
  await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.status, "enabled"));
});
afterAll(() => vi.restoreAllMocks());

/** Captures what the consumer sends to the delivery queues instead of sending it. */
function captureSends() {
  const queues = spyOnDeliveryQueues();
  for (const spy of queues.spies) spy.mockResolvedValue({} as QueueSendBatchResponse);
  return {
    queues,
    deliveries: () => queues.sent().map((m) => m.body as DeliveryMessage),
    restore: queues.restore,
  };
}

const priceEvent = (oldMinor: number, newMinor: number): EventMessage => ({
  kind: "event",
  event: testEvent("price.changed", { old_price: String(oldMinor), new_price: String(newMinor) }),
  price_change: { old_minor: oldMinor, new_minor: newMinor },
});
const stockEvent = (): EventMessage => ({ kind: "event", event: testEvent("stock.changed", { in_stock: false }) });

const receivers = (deliveries: DeliveryMessage[], of: Schemas["CreatedWebhook"][]) =>
  deliveries
    .filter((d) => of.some((w) => w.id === d.webhook_id))
    .map((d) => of.findIndex((w) => w.id === d.webhook_id))
    .sort();

describe("an event message", () => {
  it("goes to every account's enabled webhooks that take its type: one delivery message each, then it is acked", async () => {
    const [alice, bob] = await Promise.all([freshAccount().then((a) => a.token), freshAccount().then((a) => a.token)]);
    const hooks = [
      await createWebhook(alice, { url: hookUrl("both") }),
      await createWebhook(alice, { url: hookUrl("price"), events: ["price.changed"] }),
      await createWebhook(bob, { url: hookUrl("stock"), events: ["stock.changed"] }),
      await createWebhook(bob, { url: hookUrl("disabled") }),
    ];
    await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.id, hooks[3]!.id));

    const sends = captureSends();
    try {
      const price = priceEvent(1000, 900);
      const stock = stockEvent();
      await storeEvents([price, stock]);
      const result = await runQueue([price, stock]);
      expect(result.explicitAcks.sort()).toEqual([...result.ids].sort());
      const deliveries = sends.deliveries();
      const forPrice = deliveries.filter((d) => d.event.id === price.event.id);
      const forStock = deliveries.filter((d) => d.event.id === stock.event.id);
      expect(receivers(forPrice, hooks)).toEqual([0, 1]);
      expect(receivers(forStock, hooks)).toEqual([0, 2]);
      expect(forPrice[0]).toEqual({ kind: "delivery", webhook_id: forPrice[0]!.webhook_id, event: price.event });
      expect(receiver.received).toEqual([]); // fan-out sends nothing itself
    } finally {
      sends.restore();
    }
  });

  it("reaches a webhook only when the price moved by at least its min_change_pct, up or down", async () => {
    const token = (await freshAccount()).token;
    const thresholds = [0, 5, 10, 10.01, 50];
    const hooks = [];
    for (const min_change_pct of thresholds) hooks.push(await createWebhook(token, { url: hookUrl(), min_change_pct }));
    const sends = captureSends();
    try {
      const cases: [EventMessage, number[]][] = [
        [priceEvent(1000, 1100), [0, 1, 2]], // +10 %: exactly 10 passes, 10.01 does not
        [priceEvent(1000, 900), [0, 1, 2]], // −10 %
        [priceEvent(1000, 1001), [0]], // +0.1 %
        [priceEvent(999, 1500), [0, 1, 2, 3, 4]], // +50.15 %
        [priceEvent(0, 100), [0, 1, 2, 3, 4]], // from 0: any threshold
        [{ ...priceEvent(1000, 1001), price_change: null }, [0, 1, 2, 3, 4]], // currency changed: cannot be measured
        [stockEvent(), [0, 1, 2, 3, 4]], // stock events ignore the threshold
      ];
      for (const [event, expected] of cases) {
        for (const spy of sends.queues.spies) spy.mockClear();
        await storeEvents([event]);
        await runQueue([event]);
        expect(receivers(sends.deliveries(), hooks), JSON.stringify(event.price_change)).toEqual(expected);
      }
    } finally {
      sends.restore();
    }
  });

  it("to many webhooks is one delivery message per webhook, sent in batches of at most 100", async () => {
    const token = (await freshAccount()).token;
    const template = await createWebhook(token, { url: hookUrl("many") });
    const row = (await db().select().from(webhooks).where(eq(webhooks.id, template.id)).get())!;
    // 250 more, written straight to D1 past the per-account cap (fan-out does not care whose they are).
    // 5 rows a statement: D1 allows 100 bound parameters (19 columns).
    const extra = Array.from({ length: 250 }, () => ({ ...row, id: newId("whk"), url: hookUrl("many") }));
    for (let i = 0; i < extra.length; i += 5)
      await db()
        .insert(webhooks)
        .values(extra.slice(i, i + 5));
    const sends = captureSends();
    try {
      const event = priceEvent(1000, 500);
      await storeEvents([event]);
      const result = await runQueue([event]);
      expect(result.explicitAcks).toEqual(result.ids);
      const ids = new Set([template.id, ...extra.map((w) => w.id)]);
      const deliveries = sends.deliveries().filter((d) => ids.has(d.webhook_id));
      expect(deliveries).toHaveLength(251);
      expect(new Set(deliveries.map((d) => d.webhook_id)).size).toBe(251);
      for (const spy of sends.queues.spies) {
        expect(spy.mock.calls.every(([batch]) => [...batch].length <= 100)).toBe(true);
        expect(spy.mock.calls.length).toBe(Math.ceil(spy.mock.calls.flatMap(([batch]) => [...batch]).length / 100));
      }
      // Spread by webhook over every delivery queue (DELIVERY_QUEUES).
      const queueOf = new Map<string, number>();
      sends.queues.spies.forEach((spy, i) => {
        for (const [batch] of spy.mock.calls) for (const { body } of batch) queueOf.set((body as DeliveryMessage).webhook_id, i);
      });
      expect(new Set(deliveries.map((d) => queueOf.get(d.webhook_id))).size).toBe(sends.queues.spies.length);
    } finally {
      sends.restore();
      await db()
        .delete(webhooks)
        .where(like(webhooks.url, `${HOOKS_ORIGIN}/many-%`));
    }
  });

  it("is retried on the schedule when the deliveries cannot be queued", async () => {
    const token = (await freshAccount()).token;
    await createWebhook(token, { url: hookUrl() });
    const failing = spyOnDeliveryQueues();
    for (const spy of failing.spies) spy.mockRejectedValue(new Error("Queue unavailable"));
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const event = priceEvent(100, 200);
      await storeEvents([event]);
      const result = await runQueue([event], 2);
      expect(result.explicitAcks).toEqual([]);
      expect(result.retryMessages).toEqual([{ msgId: result.ids[0], delaySeconds: expect.any(Number) }]);
      expect(result.retryMessages[0]!.delaySeconds).toBeGreaterThanOrEqual(240); // attempt 2 → about 5 minutes
      expect(errors).toHaveBeenCalled();
    } finally {
      failing.restore();
      errors.mockRestore();
    }
  });
});

describe("min_change_pct is compared exactly, in integers", () => {
  it("at the boundary", () => {
    expect(meetsThreshold(1000, 3, 4)).toBe(true); // 33.33…% ≥ 10 %
    expect(meetsThreshold(3334, 3, 4)).toBe(false); // 33.33…% < 33.34 %
    expect(meetsThreshold(3333, 3, 4)).toBe(true);
    expect(meetsThreshold(1, 9_000_000_000_000, 9_000_900_000_000)).toBe(true); // 0.01 % of a huge price
  });
});

describe("from ingestion to the receiver, through the real queue", () => {
  it("a price change reaches a matching webhook within seconds, signed, and never touches a rate limit", async () => {
    const token = (await freshAccount()).token;
    const matching = await createWebhook(token, { url: hookUrl("e2e"), events: ["price.changed"], min_change_pct: 5 });
    const key = (await freshAccount({ plan: "premium" })).key;
    await ingest([{ sku: "E2E-1", price: "100.00", observed_at: "2026-05-01T00:00:00Z" }]);

    const before = rateLimitOf(await call("GET", "/competitors", { token: key }));
    const objects = await rateLimitObjects();
    const sent = spyOnDeliveryQueues(); // watched, passed on
    let kinds: string[];
    try {
      await ingest([{ sku: "E2E-1", price: "89.50", observed_at: "2026-05-02T00:00:00Z" }]);
      await settled(() => expect(receiver.to(matching.url)).toHaveLength(1), 50);
      kinds = sent.sent().map((m) => (m.body as WebhookMessage).kind);
    } finally {
      sent.restore();
    }
    const [request] = receiver.to(matching.url);
    const payload = verifyWithLibrary(matching.secret, request!) as { type: string; data: Record<string, unknown> };
    expect(payload.type).toBe("price.changed");
    expect(payload.data).toMatchObject({
      sku: "E2E-1",
      old_price: "100.00",
      new_price: "89.50",
      change_abs: "-10.50",
      change_pct: -10.5,
      direction: "down",
    });
    expect(request!.headers["webhook-id"]).toBe(payload.data.event_id);

    // One event message from the ingestion (the safety net); the delivery itself was made right after the commit
    // (src/webhooks/delivery/immediate.ts), so it never went through the queue.
    expect(kinds.filter((k) => k === "event")).toHaveLength(1);
    expect(kinds.filter((k) => k === "delivery")).toEqual([]);

    // The admin's ingestion counted in the admin bucket; the queue's work counted nowhere.
    expect(await rateLimitObjects()).toBe(objects);
    expect(rateLimitOf(await call("GET", "/competitors", { token: key })).remaining).toBe(before.remaining! - 1);
  });
});
