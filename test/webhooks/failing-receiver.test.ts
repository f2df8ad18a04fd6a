import { env } from "cloudflare:workers";
import { eq, inArray } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import type { DeliveryMessage } from "../../src/events/messages.ts";
import { MAX_OPEN_CONNECTIONS } from "../../src/platform/connections.ts";
import { database } from "../../src/platform/db.ts";
import { webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { NOT_SENT_WHILE_FAILING, PROBE_TIMEOUT_MS } from "../../src/webhooks/delivery/attempt.ts";
import { JITTER, RETRY_DELAYS_SECONDS } from "../../src/webhooks/delivery/schedule.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { settled } from "../helpers/settle.ts";
import { hang, hookUrl, installReceiver, type ReceivedRequest, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, endpointSettled, ingest, runQueue } from "../helpers/webhooks.ts";
import { invocationLog } from "../helpers/work-log.ts";

/**
 * "A failing receiver delays only itself" (contract, fourth wave): ten endpoints that never answer beside one that
 * answers at once. The queue is kept from delivering (its sends are captured), so whatever reaches a receiver came
 * from the first delivery after the ingestion. Local workerd does not enforce the 6 connections of an invocation,
 * so the test also shows it structurally: the healthy endpoint receives each event while more than 6 attempts to the
 * hanging ones are open and none of them has timed out, which no single invocation could do in production.
 * The contract's "within 5 s of the ingestion's answer" is shown without a clock, which a loaded machine stretches:
 * each event the healthy endpoint receives came from the delivery right after the answer (the queue is held), and,
 * beside the hanging ones, it came while every attempt to them was still open, so it waited on none of them.
 */

const HANGING = 10;
const EVENTS = 3;
const db = () => database(env.DB);
/** A webhook's attempts in D1, oldest first. */
const attemptsOf = (webhookId: string) =>
  db().select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, webhookId)).orderBy(webhookDeliveries.id).all();
let receiver: Receiver;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(async () => {
  vi.mocked(env.WEBHOOK_QUEUE.sendBatch).mockRestore();
  receiver.assertNoStrayRequests();
  await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.status, "enabled"));
});
afterAll(() => vi.restoreAllMocks());

let products = 0;
let cents = 1000;

/** Ingests EVENTS price changes of one product, waiting after each answer until the healthy receiver has it. */
async function deliverEach(healthy: string, onDelivered: () => void = () => {}): Promise<void> {
  const sku = `HANG-${Date.now()}-${++products}`;
  await ingest([{ sku, price: "9.00" }]);
  for (let i = 1; i <= EVENTS; i++) {
    await ingest([{ sku, price: (++cents / 100).toFixed(2) }]);
    await settled(() => expect(receiver.to(healthy)).toHaveLength(i), 10);
    onDelivered();
  }
}

describe("a failing receiver delays only itself", () => {
  it("alone, a healthy endpoint receives each event from the delivery right after the ingestion's answer", async () => {
    vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    const token = (await freshAccount()).token;
    const healthy = await createWebhook(token, { url: hookUrl("alone"), events: ["price.changed"] });
    await deliverEach(healthy.url);
  });

  it(`beside ${HANGING} endpoints that never answer, it still does, while their attempts are open and none has timed out`, async () => {
    vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    const token = (await freshAccount()).token;
    // The hanging ones first: today's fan-out reads webhooks in the order they were made.
    const hanging: Schemas["CreatedWebhook"][] = [];
    for (let i = 0; i < HANGING; i++) hanging.push(await createWebhook(token, { url: hookUrl(`hang${i}`), events: ["price.changed"] }));
    const healthy = await createWebhook(token, { url: hookUrl("healthy"), events: ["price.changed"] });
    const open = new Set<ReceivedRequest>();
    let released = false;
    for (const hook of hanging)
      receiver.respond(hook.url, (request) => {
        open.add(request);
        // The request's own timer answers once released: a promise settled from the test's context would carry the
        // object's continuation out of its own (workerd refuses its storage there).
        return new Promise<Response>((resolve, reject) => {
          const poll = setInterval(() => {
            if (!released) return;
            clearInterval(poll);
            resolve(new Response("released", { status: 503 }));
          }, 20);
          request.signal?.addEventListener("abort", () => {
            clearInterval(poll);
            reject(request.signal!.reason);
          });
        });
      });

    const stillOpen = () => [...open].filter((request) => !request.signal?.aborted);
    await deliverEach(healthy.url, () => {
      // The healthy endpoint was answered while every hanging attempt made so far was still waiting.
      expect(stillOpen()).toHaveLength(open.size);
    });
    // Every hanging endpoint had its first attempt open at once, beside the healthy one's answered request.
    await settled(() => expect(new Set(stillOpen().map((request) => request.url)).size).toBe(HANGING));
    expect(stillOpen().length).toBeGreaterThan(MAX_OPEN_CONNECTIONS);

    // Let the hanging endpoints fail at once from now on, so their objects finish before the test does.
    for (const hook of hanging) receiver.respond(hook.url, () => new Response("down", { status: 503 }));
    released = true;
    await vi.waitFor(
      async () => {
        const attempts = await db()
          .select({ eventId: webhookDeliveries.eventId, webhookId: webhookDeliveries.webhookId })
          .from(webhookDeliveries)
          .where(
            inArray(
              webhookDeliveries.webhookId,
              hanging.map((hook) => hook.id),
            ),
          )
          .all();
        expect(new Set(attempts.map((a) => `${a.webhookId} ${a.eventId}`)).size).toBe(HANGING * EVENTS);
      },
      { timeout: 20_000, interval: 100 },
    );
  }, 60_000);

  it("a failing endpoint gets one probe at a time; when it gets no answer, the deliveries behind it are not sent but retried on the schedule; a probe's success sends them all", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl("probed"), events: ["price.changed"] });
    const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    const retries = () => sent.mock.calls.flatMap(([batch]) => [...batch]);
    receiver.respond(hook.url, () => new Response("down", { status: 503 }));
    await runQueue([deliveryTo(hook.id)]); // made by the consumer: the endpoint is failing from now on

    // The probe's timeout fires at once instead of after 5 s.
    const realTimeout = AbortSignal.timeout.bind(AbortSignal);
    vi.spyOn(AbortSignal, "timeout").mockImplementation((ms) => {
      if (ms !== PROBE_TIMEOUT_MS) return realTimeout(ms);
      const controller = new AbortController();
      setTimeout(() => controller.abort(new DOMException("The operation timed out.", "TimeoutError")), 1);
      return controller.signal;
    });
    receiver.respond(hook.url, hang);
    const messages = [deliveryTo(hook.id), deliveryTo(hook.id), deliveryTo(hook.id)];
    const handed = await runQueue(messages);
    expect(handed.explicitAcks).toEqual(handed.ids);
    await endpointSettled(hook.id);
    vi.mocked(AbortSignal.timeout).mockRestore();
    expect(receiver.to(hook.url)).toHaveLength(2); // the consumer's attempt, then one probe
    const made = await attemptsOf(hook.id);
    expect(made.slice(1).map((a) => [a.eventId, a.attempt, a.error, a.outcome])).toEqual([
      [messages[0]!.event.id, 1, `No response within ${PROBE_TIMEOUT_MS / 1000} s.`, "retrying"],
      [messages[1]!.event.id, 1, NOT_SENT_WHILE_FAILING, "retrying"],
      [messages[2]!.event.id, 1, NOT_SENT_WHILE_FAILING, "retrying"],
    ]);
    // Each keeps its place in the schedule: its second attempt after the first delay.
    const queued = retries().filter((m) => (m.body as DeliveryMessage).attempts_before === 1);
    expect(queued.map((m) => (m.body as DeliveryMessage).event.id)).toEqual(messages.map((m) => m.event.id));
    for (const { delaySeconds } of queued) expect(delaySeconds).toBeGreaterThanOrEqual(Math.round(RETRY_DELAYS_SECONDS[0] * (1 - JITTER)));

    // The endpoint is back: the first retry's probe succeeds, and the others go out with it.
    receiver.respond(hook.url, () => new Response("ok"));
    await runQueue(queued.map((m) => m.body));
    await endpointSettled(hook.id);
    expect(receiver.to(hook.url)).toHaveLength(5);
    const last = await attemptsOf(hook.id);
    expect(last.slice(4).map((a) => [a.attempt, a.outcome])).toEqual([
      [2, "delivered"],
      [2, "delivered"],
      [2, "delivered"],
    ]);
    expect((await db().select().from(webhooks).where(eq(webhooks.id, hook.id)).get())!.failingSince).toBeNull();
  });
});

/**
 * D1 runs one statement at a time, and a failing endpoint's object is among its busiest callers (docs/costs.json,
 * webhook_endpoint_alarm): its alarm's statements are a few for the whole run, not a few per retry it makes. Before
 * issue 46's change each probe was a round of its own, a read and a batch of five: 30 statements for 5 retries, 300
 * for 50.
 */
const ALARM_D1_STATEMENTS = 6;

describe("a failing endpoint's alarm", () => {
  it.each([5, 50])(
    `makes at most ${ALARM_D1_STATEMENTS} D1 statements with %i retries due, each probed and recorded`,
    async (due) => {
      const token = (await freshAccount()).token;
      const hook = await createWebhook(token, { url: hookUrl(`due-${due}`), events: ["price.changed"] });
      const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
      receiver.respond(hook.url, () => new Response("down", { status: 503 })); // answers at once, as the bench's does
      await runQueue([deliveryTo(hook.id)]); // made by the consumer: the endpoint is failing from now on

      const log = invocationLog();
      const retries = Array.from({ length: due }, () => deliveryTo(hook.id));
      await runQueue(retries, 2); // handed to the endpoint's object, whose alarm makes them
      await endpointSettled(hook.id, 20_000);
      const alarms = await settled(() => {
        const lines = log.lines.filter((line) => line.invocation === "webhook_endpoint_alarm");
        expect(lines).not.toHaveLength(0);
        return lines;
      });
      const statements = alarms.map((line) => line.d1Statements);
      expect(
        statements.every((n) => n <= ALARM_D1_STATEMENTS),
        `statements per alarm: ${statements.join(", ")}`,
      ).toBe(true);

      // Each retry was a probe of its own (the endpoint answers), recorded, and queued for its next attempt.
      expect(receiver.to(hook.url)).toHaveLength(1 + due);
      const made = await attemptsOf(hook.id);
      expect(made.slice(1).map((a) => [a.eventId, a.attempt, a.outcome])).toEqual(retries.map((r) => [r.event.id, 2, "retrying"]));
      const queued = sent.mock.calls.flatMap(([batch]) => [...batch]).filter((m) => (m.body as DeliveryMessage).attempts_before === 2);
      expect(queued.map((m) => (m.body as DeliveryMessage).event.id)).toEqual(retries.map((r) => r.event.id));
      expect((await db().select().from(webhooks).where(eq(webhooks.id, hook.id)).get())!.status).toBe("enabled");
    },
    60_000,
  );
});
