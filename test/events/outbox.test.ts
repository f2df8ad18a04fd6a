import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  getQueueResult,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { eq, inArray } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { DEAD_LETTER_QUEUE, type DeliveryMessage, type EventMessage, type WebhookMessage } from "../../src/events/messages.ts";
import { claimForFanOut, STUCK_AFTER_MS, SWEEP_AFTER_MS } from "../../src/events/outbox.ts";
import { RETENTION_MS } from "../../src/events/retention.ts";
import worker from "../../src/index.ts";
import { database } from "../../src/platform/db.ts";
import { events, webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { DEAD_LETTERED } from "../../src/webhooks/delivery/dead-letters.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { captureLogs } from "../helpers/logs.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, ingest, runQueue, spyOnDeliveryQueues, storeEvents } from "../helpers/webhooks.ts";

/**
 * The outbox: events are stored with the change, relayed after the commit, swept when the relay
 * failed, and fanned out once per event id however many times they are sent.
 */

const db = () => database(env.DB);
let receiver: Receiver;
let skus = 0;
const sku = () => `OUTBOX-${Date.now()}-${++skus}`;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(async () => {
  vi.useRealTimers();
  receiver.assertNoStrayRequests();
  await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.status, "enabled"));
});
afterAll(() => vi.restoreAllMocks());

/** Watches the queues' sendBatch (events, and deliveries over every delivery queue) without passing messages on: the test runs the consumer itself. */
function captureSends() {
  const queues = spyOnDeliveryQueues();
  for (const spy of queues.spies) spy.mockResolvedValue({} as QueueSendBatchResponse);
  return {
    messages: () => queues.sent().map((m) => m.body as WebhookMessage),
    restore: queues.restore,
  };
}

/** Runs the Worker's scheduled handler, as the cron trigger does. */
async function runSweep() {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
  await waitOnExecutionContext(ctx);
}

const rowsOf = (ids: string[]) => db().select().from(events).where(inArray(events.id, ids)).all();

describe("an ingestion whose queue send fails after the commit", () => {
  it("still answers 200 and loses nothing: the events are stored, and the sweep sends them once the relay's chance has passed", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl(), events: ["price.changed"] });
    const code = sku();
    await ingest([{ sku: code, price: "10.00" }]);

    // Injected fault: every send to the queue fails, from the commit onwards.
    const failing = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockRejectedValue(new Error("injected fault: queue unavailable"));
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const result = await ingest([{ sku: code, price: "12.00" }]);
    expect(result).toMatchObject({ price_changes: 1 });
    failing.mockRestore();
    errors.mockRestore();

    const [stored] = await db()
      .select()
      .from(events)
      .where(eq(events.type, "price.changed"))
      .orderBy(events.seq)
      .all()
      .then((rows) => rows.slice(-1));
    expect(stored).toMatchObject({ relayedAt: null, oldMinor: 1000, newMinor: 1200 });
    expect(JSON.parse(stored!.payload)).toMatchObject({
      type: "price.changed",
      data: { sku: code, new_price: "12.00", event_id: stored!.id },
    });

    // The first delivery, right after the commit, needs no queue (src/webhooks/delivery/immediate.ts): the webhook has it.
    await settled(() => expect(receiver.to(hook.url)).toHaveLength(1), 20);

    // A sweep right away leaves it to the relay; SWEEP_AFTER_MS later it sends it.
    const sends = captureSends();
    await runSweep();
    expect(sends.messages().filter((m) => m.kind === "event" && m.event.id === stored!.id)).toEqual([]);
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + SWEEP_AFTER_MS + 1000 });
    await runSweep();
    vi.useRealTimers();
    const swept = sends.messages().filter((m): m is EventMessage => m.kind === "event" && m.event.id === stored!.id);
    sends.restore();
    expect(swept).toEqual([
      {
        kind: "event",
        event: { id: stored!.id, type: "price.changed", timestamp: stored!.timestamp, data: expect.objectContaining({ sku: code }) },
        price_change: { old_minor: 1000, new_minor: 1200 },
      },
    ]);
    expect((await rowsOf([stored!.id]))[0]!.relayedAt).not.toBeNull();

    // The consumer finds it fanned out already: acked, no second delivery.
    const deliveries = captureSends();
    const acked = await runQueue(swept);
    expect(acked.explicitAcks).toEqual(acked.ids);
    expect((deliveries.messages() as DeliveryMessage[]).filter((m) => m.webhook_id === hook.id)).toEqual([]);
    deliveries.restore();
    const [request] = receiver.to(hook.url);
    expect(verifyWithLibrary(hook.secret, request!)).toMatchObject({ type: "price.changed", data: { sku: code } });
  });
});

describe("an event sent twice (a relay and a sweep that raced)", () => {
  it("is fanned out once: the second copy is acked without deliveries, in the same batch or a later one", async () => {
    const token = (await freshAccount()).token;
    const hooks = await Promise.all([createWebhook(token, { url: hookUrl() }), createWebhook(token, { url: hookUrl() })]);
    const first = {
      kind: "event",
      event: {
        id: `evt_${crypto.randomUUID().replaceAll("-", "")}`,
        type: "stock.changed",
        timestamp: new Date().toISOString(),
        data: { in_stock: false },
      },
    } satisfies EventMessage;
    const second = { ...first, event: { ...first.event, id: `evt_${crypto.randomUUID().replaceAll("-", "")}` } } satisfies EventMessage;
    await storeEvents([first, second]);

    const sends = captureSends();
    const together = await runQueue([first, first]); // both copies in one batch
    const [apart1, apart2] = await Promise.all([runQueue([second]), runQueue([second])]); // two batches at once
    const later = await runQueue([first]); // and once more, later
    const deliveries = (sends.messages() as DeliveryMessage[]).filter((m) => hooks.some((h) => h.id === m.webhook_id));
    sends.restore();

    for (const result of [together, apart1!, apart2!, later]) expect(result.explicitAcks.sort()).toEqual([...result.ids].sort());
    const pairs = deliveries.map((m) => `${m.event.id} ${m.webhook_id}`).sort();
    expect(pairs).toEqual([first.event.id, second.event.id].flatMap((id) => hooks.map((h) => `${id} ${h.id}`)).sort());
  });

  it("a fan-out whose deliveries cannot be queued gives its claim back, so the retry fans it out", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const event = {
      kind: "event",
      event: { id: `evt_${crypto.randomUUID().replaceAll("-", "")}`, type: "stock.changed", timestamp: new Date().toISOString(), data: {} },
    } satisfies EventMessage;
    await storeEvents([event]);
    const failing = spyOnDeliveryQueues();
    for (const spy of failing.spies) spy.mockRejectedValue(new Error("injected fault: queue unavailable"));
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const failed = await runQueue([event]);
    failing.restore();
    errors.mockRestore();
    expect(failed.retryMessages).toHaveLength(1);
    expect((await rowsOf([event.event.id]))[0]).toMatchObject({ claimedAt: null, fannedOutAt: null });

    const sends = captureSends();
    await runQueue([event], 2);
    expect((sends.messages() as DeliveryMessage[]).filter((m) => m.webhook_id === hook.id)).toHaveLength(1);
    sends.restore();
  });
});

describe("a consumer that dies holding a claim", () => {
  it("loses nothing: the sweep sends the event again once it is stuck, and the claim's lease has run out by then", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const event = {
      kind: "event",
      event: { id: `evt_${crypto.randomUUID().replaceAll("-", "")}`, type: "stock.changed", timestamp: new Date().toISOString(), data: {} },
    } satisfies EventMessage;
    await storeEvents([event]);
    // Relayed and claimed, then nothing: the consumer died before queuing the deliveries.
    await db().update(events).set({ relayedAt: new Date().toISOString() }).where(eq(events.id, event.event.id));
    expect(await claimForFanOut(db(), [event.event.id])).toEqual(new Set([event.event.id]));
    const sends = captureSends();
    await runQueue([event]); // the same event again within the lease: not fanned out a second time
    await runSweep(); // not stuck yet
    expect(sends.messages()).toEqual([]);

    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + STUCK_AFTER_MS + 1000 });
    await runSweep();
    const resent = sends.messages().filter((m): m is EventMessage => m.kind === "event" && m.event.id === event.event.id);
    expect(resent).toHaveLength(1);
    await runQueue(resent);
    expect((sends.messages() as DeliveryMessage[]).filter((m) => m.kind === "delivery" && m.webhook_id === hook.id)).toHaveLength(1);
    sends.restore();
    expect((await rowsOf([event.event.id]))[0]!.fannedOutAt).not.toBeNull();
  });
});

describe("the sweep", () => {
  it("deletes events older than 30 days, and only those", async () => {
    const old = {
      kind: "event",
      event: {
        id: `evt_${crypto.randomUUID().replaceAll("-", "")}`,
        type: "stock.changed",
        timestamp: new Date(Date.now() - RETENTION_MS - 60_000).toISOString(),
        data: {},
      },
    } satisfies EventMessage;
    const recent = {
      kind: "event",
      event: {
        id: `evt_${crypto.randomUUID().replaceAll("-", "")}`,
        type: "stock.changed",
        timestamp: new Date(Date.now() - RETENTION_MS + 3_600_000).toISOString(),
        data: {},
      },
    } satisfies EventMessage;
    await storeEvents([old, recent]);
    await db()
      .update(events)
      .set({ relayedAt: new Date().toISOString() })
      .where(inArray(events.id, [old.event.id, recent.event.id]));
    await runSweep();
    expect((await rowsOf([old.event.id, recent.event.id])).map((row) => row.id)).toEqual([recent.event.id]);
  });
});

describe("the dead-letter queue's consumer", () => {
  async function runDeadLetters(bodies: WebhookMessage[], withEnv: typeof env = env) {
    const batch = createMessageBatch(
      DEAD_LETTER_QUEUE,
      bodies.map((body, i) => ({ id: `dlq-${Date.now()}-${i}`, timestamp: new Date(), attempts: 1, body })),
    );
    const ctx = createExecutionContext();
    const queue: ExportedHandlerQueueHandler<typeof env> = worker.queue;
    await queue(batch, withEnv, ctx);
    return getQueueResult(batch, ctx);
  }

  /** D1 refusing every write to the events table (an injected fault; the other statements reach the real D1). */
  const failingEventWrites = new Proxy(env.DB, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property === "prepare") {
        return (query: string) => {
          if (/^update "events"/i.test(query)) throw new Error("injected: D1 is unavailable");
          return value.call(target, query);
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });

  it("records a delivery's final failure (once), so that replay's only_failed finds it", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const message = deliveryTo(hook.id);
    const result = await runDeadLetters([message, message]);
    expect(result.explicitAcks).toHaveLength(2);
    const rows = await db().select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, hook.id)).all();
    expect(rows).toEqual([
      expect.objectContaining({ eventId: message.event.id, outcome: "failed", error: DEAD_LETTERED, statusCode: null }),
    ]);
  });

  it("hands an event whose fan-out kept failing back to the sweep", async () => {
    const event = {
      kind: "event",
      event: { id: `evt_${crypto.randomUUID().replaceAll("-", "")}`, type: "stock.changed", timestamp: new Date().toISOString(), data: {} },
    } satisfies EventMessage;
    await storeEvents([event]);
    await db()
      .update(events)
      .set({ relayedAt: new Date().toISOString(), claimedAt: new Date().toISOString() })
      .where(eq(events.id, event.event.id));
    await runDeadLetters([event]);
    expect((await rowsOf([event.event.id]))[0]).toMatchObject({ relayedAt: null, claimedAt: null, fannedOutAt: null });
  });

  it("when handing an event back fails, its message is retried, not acked (nothing lost); the batch's deliveries are still recorded", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const event = {
      kind: "event",
      event: { id: `evt_${crypto.randomUUID().replaceAll("-", "")}`, type: "stock.changed", timestamp: new Date().toISOString(), data: {} },
    } satisfies EventMessage;
    await storeEvents([event]);
    const relayedAt = new Date().toISOString();
    await db().update(events).set({ relayedAt, claimedAt: relayedAt }).where(eq(events.id, event.event.id));
    const delivery = deliveryTo(hook.id);

    const logs = captureLogs();
    const result = await runDeadLetters([event, delivery], { ...env, DB: failingEventWrites });
    expect(logs).toEqual([
      expect.objectContaining({ level: "error", source: "webhook-dlq", message: "dead-lettered events not handed back; retried" }),
    ]);
    expect(result.explicitAcks).toEqual([expect.stringMatching(/-1$/)]);
    expect(result.retryMessages).toEqual([{ msgId: expect.stringMatching(/-0$/) }]);
    expect((await rowsOf([event.event.id]))[0]).toMatchObject({ relayedAt, claimedAt: relayedAt });
    expect(await db().select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, hook.id)).all()).toHaveLength(1);
  });
});
