import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { eq, inArray } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { DeliveryMessage, EventMessage } from "../../src/events/messages.ts";
import worker from "../../src/index.ts";
import { database } from "../../src/platform/db.ts";
import { newId } from "../../src/platform/ids.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { events, webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { accountBudgets } from "../../src/rate-limit/stub.ts";
import { sandboxFactsOf } from "../../src/sandbox/facts.ts";
import { accountSandbox } from "../../src/sandbox/stub.ts";
import { deliverAfterCommit } from "../../src/webhooks/delivery/immediate.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { captureLogs } from "../helpers/logs.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, ingest, runQueue, spyOnDeliveryQueues, storeEvents } from "../helpers/webhooks.ts";

/**
 * The first delivery right after the commit (src/webhooks/delivery/immediate.ts): the queue is watched and
 * kept from delivering (sendBatch and send captured), so whatever reaches a receiver came from the
 * ingestion's first delivery (made by the webhooks' objects); failures must show up on the queue instead.
 */

const db = () => database(env.DB);
let receiver: Receiver;
let queues: ReturnType<typeof spyOnDeliveryQueues>;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(async () => {
  queues.restore();
  receiver.assertNoStrayRequests();
  await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.status, "enabled"));
});
afterAll(() => vi.restoreAllMocks());

function captureQueue() {
  // Events, and deliveries over every delivery queue (a consumer's fan-out spreads them by webhook).
  queues = spyOnDeliveryQueues();
  for (const spy of queues.spies) spy.mockResolvedValue({} as QueueSendBatchResponse);
  // A failed first attempt is sent with its retry delay; everything else goes at once.
  const sent = queues.sent;
  const queued = () =>
    sent()
      .filter((m) => m.delaySeconds === undefined)
      .map((m) => m.body);
  return {
    events: () => queued().filter((m): m is EventMessage => m.kind === "event"),
    deliveries: () => queued().filter((m): m is DeliveryMessage => m.kind === "delivery"),
    retries: () =>
      sent()
        .filter((m) => m.delaySeconds !== undefined)
        .map((m) => ({ body: m.body as DeliveryMessage, delaySeconds: m.delaySeconds })),
  };
}

let skus = 0;
async function priceChange() {
  const sku = `NOW-${Date.now()}-${++skus}`;
  await ingest([{ sku, price: "10.00" }]);
  await ingest([{ sku, price: "9.00" }]);
  return sku;
}

const attemptsOf = (webhookId: string) =>
  db().select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, webhookId)).orderBy(webhookDeliveries.id).all();

/** The once-a-minute cron trigger, run at `at`. */
async function cron(at: number) {
  vi.useFakeTimers({ toFake: ["Date"], now: at });
  try {
    await worker.scheduled(createScheduledController({ scheduledTime: at, cron: "* * * * *" }), env);
  } finally {
    vi.useRealTimers();
  }
}

const priceChangedEvent = (): EventMessage => ({
  kind: "event",
  event: { id: newId("evt"), type: "price.changed", timestamp: new Date().toISOString(), data: {} },
  price_change: { old_minor: 1000, new_minor: 900 },
});

const fannedOut = async (ids: string[]) =>
  (await db().select({ at: events.fannedOutAt }).from(events).where(inArray(events.id, ids)).all()).map((row) => row.at !== null);

describe("the first delivery, right after the commit", () => {
  it("reaches the receiver right after the ingestion (made by the webhook's object), signed, recorded as attempt 1; the relayed event is then acked by the consumer without a second fan-out", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("now"), events: ["price.changed"] });
    const queue = captureQueue();
    await priceChange();
    await settled(() => expect(receiver.to(hook.url)).toHaveLength(1), 20);
    const [request] = receiver.to(hook.url);
    expect(verifyWithLibrary(hook.secret, request!)).toMatchObject({ type: "price.changed", data: { new_price: "9.00" } });
    await settled(async () => expect(await fannedOut(queue.events().map((m) => m.event.id))).toEqual([true]), 20);
    const recorded = await db().select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, hook.id)).all();
    expect(recorded).toMatchObject([{ attempt: 1, outcome: "delivered", statusCode: 200 }]);
    expect(queue.deliveries()).toEqual([]);
    expect(queue.retries()).toEqual([]);

    // The relay still put the event on the queue (the safety net); the consumer finds it fanned out and only acks it.
    const relayed = queue.events();
    expect(relayed).toHaveLength(1);
    const result = await runQueue(relayed);
    expect(result.explicitAcks).toEqual(result.ids);
    expect(queue.deliveries()).toEqual([]);
    expect(receiver.to(hook.url)).toHaveLength(1);
  });

  it("a failed first attempt goes to the queue as attempt 2, after the schedule's first delay; the consumer counts it so", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("down"), events: ["price.changed"] });
    receiver.respond(hook.url, () => new Response("busy", { status: 503 }));
    const queue = captureQueue();
    await priceChange();
    await settled(() => expect(queue.retries()).toHaveLength(1), 20);
    const [retry] = queue.retries();
    expect(retry!.body).toMatchObject({ kind: "delivery", webhook_id: hook.id, attempts_before: 1 });
    expect(retry!.delaySeconds).toBeGreaterThanOrEqual(4);
    expect(retry!.delaySeconds).toBeLessThanOrEqual(6);

    // The endpoint is failing now: the consumer hands the retry back to the webhook's object, which makes it.
    receiver.respond(hook.url, () => new Response("ok"));
    const result = await runQueue([retry!.body], 1);
    expect(result.explicitAcks).toEqual(result.ids);
    await settled(async () =>
      expect((await attemptsOf(hook.id)).map((a) => [a.attempt, a.outcome])).toEqual([
        [1, "retrying"],
        [2, "delivered"],
      ]),
    );
  });

  it("the last attempt of a message that started outside the queue is recorded as failed and acked, not tried a 9th time", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("gone"), events: ["price.changed"] });
    receiver.respond(hook.url, () => new Response("no", { status: 500 }));
    const queue = captureQueue();
    await priceChange();
    await settled(() => expect(queue.retries()).toHaveLength(1), 20);
    const result = await runQueue([queue.retries()[0]!.body], 7); // 1 before the queue + 7 = the 8th and last
    expect(result.explicitAcks).toEqual(result.ids);
    expect(result.retryMessages).toEqual([]);
    await settled(async () => expect((await attemptsOf(hook.id)).at(-1)).toMatchObject({ attempt: 8, outcome: "failed" }));
    expect(queue.retries()).toHaveLength(1); // the first attempt's: none after the last
  });

  it("a first delivery that fails after its claim, and whose hand-back fails too, is fanned out by the next minute's cron, not left for the 15-minute sweep", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("late"), events: ["price.changed"] });
    const queue = captureQueue();
    const event = priceChangedEvent();
    await storeEvents([event]);
    await db().update(events).set({ relayedAt: new Date().toISOString() }).where(eq(events.id, event.event.id)); // the relay
    // D1 fails right after the claim: the fan-out fails, and so does handing the events back.
    let statements = 0;
    const failsAfterClaim = new Proxy(env.DB, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property !== "prepare") return typeof value === "function" ? value.bind(target) : value;
        return (query: string) => {
          if (++statements > 1) throw new Error("injected: D1 is unavailable");
          return value.call(target, query);
        };
      },
    });
    const logs = captureLogs();
    const work = new WorkMeter();
    await deliverAfterCommit(
      {
        db: database(failsAfterClaim),
        alerts: database(env.ALERTS_DB),
        queue: env.WEBHOOK_QUEUE,
        endpoints: env.WEBHOOK_ENDPOINT,
        sandboxFacts: sandboxFactsOf((accountId) => accountSandbox(env.SANDBOX, work, accountId)),
        work,
        budgets: accountBudgets(env.RATE_LIMIT_BUCKETS, work),
      },
      [event],
    );
    expect(logs.map((log) => log.message)).toEqual([
      "immediate delivery failed, the queue takes over",
      "handing back failed, the claims lapse to the outbox sweep",
    ]);
    // The queue's copy finds the event claimed, and is acked without a fan-out.
    const copy = await runQueue([event]);
    expect(copy.explicitAcks).toEqual(copy.ids);
    expect(queue.deliveries()).toEqual([]);

    // The cron of this minute finds the claim still held; the next minute's finds it lapsed and sends the event again.
    await cron(Date.now());
    expect(queue.events()).toEqual([]);
    await cron(Date.now() + 60_000);
    expect(queue.events()).toEqual([event]);
    await runQueue(queue.events());
    expect(queue.deliveries()).toMatchObject([{ kind: "delivery", webhook_id: hook.id, event: { id: event.event.id } }]);
    await runQueue(queue.deliveries());
    expect(receiver.to(hook.url)).toHaveLength(1);
    expect(await fannedOut([event.event.id])).toEqual([true]);
  });
});
