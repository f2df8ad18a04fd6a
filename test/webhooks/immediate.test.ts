import { env } from "cloudflare:workers";
import { eq, inArray } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, type MockInstance, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import type { DeliveryMessage, EventMessage, WebhookMessage } from "../../src/events/messages.ts";
import { SWEEP_AFTER_MS, sweepOutbox } from "../../src/events/outbox.ts";
import { database } from "../../src/platform/db.ts";
import { events, webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { MAX_IMMEDIATE_DELIVERIES } from "../../src/webhooks/delivery/immediate.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, ingest, runQueue } from "../helpers/webhooks.ts";

/**
 * The first delivery right after the commit (src/webhooks/delivery/immediate.ts): the queue is watched and
 * kept from delivering (sendBatch and send captured), so whatever reaches a receiver came from the
 * ingestion's own invocation; failures and overflow must show up on the queue instead.
 */

const db = () => database(env.DB);
let receiver: Receiver;
let batches: MockInstance<Queue<WebhookMessage>["sendBatch"]>;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(async () => {
  batches.mockRestore();
  receiver.assertNoStrayRequests();
  await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.status, "enabled"));
});
afterAll(() => vi.restoreAllMocks());

function captureQueue() {
  batches = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
  // A failed first attempt is sent with its retry delay; everything else goes at once.
  const sent = () => batches.mock.calls.flatMap(([batch]) => [...batch]);
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

const fannedOut = async (ids: string[]) =>
  (await db().select({ at: events.fannedOutAt }).from(events).where(inArray(events.id, ids)).all()).map((row) => row.at !== null);

describe("the first delivery, right after the commit", () => {
  it("reaches the receiver from the ingestion itself, signed, recorded as attempt 1; the relayed event is then acked by the consumer without a second fan-out", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("now"), events: ["price.changed"] });
    const queue = captureQueue();
    await priceChange();
    await vi.waitFor(() => expect(receiver.to(hook.url)).toHaveLength(1), { timeout: 5_000, interval: 20 });
    const [request] = receiver.to(hook.url);
    expect(verifyWithLibrary(hook.secret, request!)).toMatchObject({ type: "price.changed", data: { new_price: "9.00" } });
    await vi.waitFor(async () => expect(await fannedOut(queue.events().map((m) => m.event.id))).toEqual([true]), {
      timeout: 5_000,
      interval: 20,
    });
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
    await vi.waitFor(() => expect(queue.retries()).toHaveLength(1), { timeout: 5_000, interval: 20 });
    const [retry] = queue.retries();
    expect(retry!.body).toMatchObject({ kind: "delivery", webhook_id: hook.id, attempts_before: 1 });
    expect(retry!.delaySeconds).toBeGreaterThanOrEqual(4);
    expect(retry!.delaySeconds).toBeLessThanOrEqual(6);

    receiver.respond(hook.url, () => new Response("ok"));
    const result = await runQueue([retry!.body], 1);
    expect(result.explicitAcks).toEqual(result.ids);
    const attempts = await db()
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.webhookId, hook.id))
      .orderBy(webhookDeliveries.id)
      .all();
    expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, "retrying"],
      [2, "delivered"],
    ]);
  });

  it("the last attempt of a message that started outside the queue is recorded as failed and acked, not tried a 9th time", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("gone"), events: ["price.changed"] });
    receiver.respond(hook.url, () => new Response("no", { status: 500 }));
    const queue = captureQueue();
    await priceChange();
    await vi.waitFor(() => expect(queue.retries()).toHaveLength(1), { timeout: 5_000, interval: 20 });
    const result = await runQueue([queue.retries()[0]!.body], 7); // 1 before the queue + 7 = the 8th and last
    expect(result.explicitAcks).toEqual(result.ids);
    expect(result.retryMessages).toEqual([]);
    const last = await db()
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.webhookId, hook.id))
      .orderBy(webhookDeliveries.id)
      .all();
    expect(last.at(-1)).toMatchObject({ attempt: 8, outcome: "failed" });
  });

  it("when the queue refuses its retry and the hand-back too, the event is left unsent for the sweep, not claimed by nobody", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("refused"), events: ["price.changed"] });
    receiver.respond(hook.url, () => new Response("no", { status: 500 }));
    captureQueue();
    const quiet = vi.spyOn(console, "error").mockImplementation(() => {}); // the injected faults' logs
    const sku = `NOW-${Date.now()}-${++skus}`;
    await ingest([{ sku, price: "10.00" }]);
    // The price change's relay succeeds; then every send fails: the first attempt's retry and the hand-back.
    const before = batches.mock.calls.length;
    batches.mockRejectedValue(new Error("injected fault: queue send failed")).mockResolvedValueOnce({} as QueueSendBatchResponse);
    await ingest([{ sku, price: "9.00" }]);
    await vi.waitFor(() => expect(batches.mock.calls.length).toBeGreaterThanOrEqual(before + 3), { timeout: 5_000, interval: 20 });
    const sent = (call: number) => [...batches.mock.calls[call]![0]].map((m) => m.body);
    const [relayed] = sent(before) as EventMessage[];
    expect(sent(before + 1)).toMatchObject([{ kind: "delivery", attempts_before: 1 }]);
    await vi.waitFor(async () => {
      const [row] = await db().select().from(events).where(eq(events.id, relayed!.event.id)).all();
      expect(row).toMatchObject({ relayedAt: null, claimedAt: null, fannedOutAt: null });
    });

    // The sweep's next run sends it again.
    batches.mockResolvedValue({} as QueueSendBatchResponse);
    await sweepOutbox(db(), env.WEBHOOK_QUEUE, Date.now() + SWEEP_AFTER_MS + 1000);
    expect(sent(batches.mock.calls.length - 1)).toContainEqual(relayed);
    quiet.mockRestore();
  });

  it(`at most ${MAX_IMMEDIATE_DELIVERIES} deliveries at once from the ingestion; the others are queued at once`, async () => {
    const token = (await freshAccount()).token;
    const hooks: Schemas["CreatedWebhook"][] = [];
    for (let i = 0; i < MAX_IMMEDIATE_DELIVERIES + 3; i++)
      hooks.push(await createWebhook(token, { url: hookUrl(`many${i}`), events: ["price.changed"] }));
    let inFlight = 0;
    let most = 0;
    for (const hook of hooks) {
      receiver.respond(hook.url, async () => {
        most = Math.max(most, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 20));
        inFlight--;
        return new Response("ok");
      });
    }
    const queue = captureQueue();
    await priceChange();
    await vi.waitFor(() => expect(queue.deliveries()).toHaveLength(3), { timeout: 5_000, interval: 20 });
    await vi.waitFor(() => expect(hooks.filter((hook) => receiver.to(hook.url).length === 1)).toHaveLength(MAX_IMMEDIATE_DELIVERIES), {
      timeout: 5_000,
      interval: 20,
    });
    expect(most).toBeLessThanOrEqual(MAX_IMMEDIATE_DELIVERIES);
    const queuedFor = new Set(queue.deliveries().map((d) => d.webhook_id));
    expect(hooks.filter((hook) => queuedFor.has(hook.id)).every((hook) => receiver.to(hook.url).length === 0)).toBe(true);
  });
});
