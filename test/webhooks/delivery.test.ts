import { listDurableObjectIds } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { desc, eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import type { WebhookMessage } from "../../src/events/messages.ts";
import { MAX_OPEN_CONNECTIONS } from "../../src/platform/connections.ts";
import { database } from "../../src/platform/db.ts";
import { webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { DELIVERY_TIMEOUT_MS, PROBE_TIMEOUT_MS, USER_AGENT } from "../../src/webhooks/delivery/attempt.ts";
import { JITTER, MAX_ATTEMPTS, RETRY_DELAYS_SECONDS } from "../../src/webhooks/delivery/schedule.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf } from "../helpers/http.ts";
import { settled } from "../helpers/settle.ts";
import { hang, hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, runQueue, storeEvents, testEvent } from "../helpers/webhooks.ts";

/** The objects admission uses: the keys' and the fixed buckets'. */
const rateLimitObjects = async () =>
  (await listDurableObjectIds(env.API_KEY_OBJECTS)).length + (await listDurableObjectIds(env.RATE_LIMIT_BUCKETS)).length;

/**
 * The consumer, called as the queue calls it (createMessageBatch / getQueueResult): what it sends,
 * what it records, and what it acks or retries with which delay. Receivers are mocked in the isolate
 * (helpers/webhook-receiver.ts): real ones are out of this machine's reach.
 */

const db = () => database(env.DB);
let receiver: Receiver;
let token: string;

beforeAll(() => {
  receiver = installReceiver();
});
beforeEach(async () => {
  token = (await freshAccount()).token; // an account per test: at most 20 webhooks each
});
afterEach(() => receiver.assertNoStrayRequests());
afterAll(() => vi.restoreAllMocks());

const newWebhook = (body: Record<string, unknown> = {}) => createWebhook(token, { url: hookUrl(), ...body });
const attemptsOf = (webhookId: string) =>
  db().select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, webhookId)).orderBy(webhookDeliveries.id).all();
const statusOf = async (webhook: Schemas["CreatedWebhook"]) => expectJson(await call("GET", `/webhooks/${webhook.id}`, { token }), 200);

describe("a delivery", () => {
  it("is a POST signed as Standard Webhooks says: the standardwebhooks library verifies it", async () => {
    const webhook = await newWebhook();
    const event = testEvent("price.changed", { sku: "SIGNED-1", new_price: "9.99", note: "ünïcødé ✓" });
    const before = Math.floor(Date.now() / 1000);
    const result = await runQueue([deliveryTo(webhook.id, event)]);
    expect(result.explicitAcks).toEqual(result.ids);
    expect(result.retryMessages).toEqual([]);

    const [request, ...more] = receiver.to(webhook.url);
    expect(more).toEqual([]);
    expect(request!.method).toBe("POST");
    expect(request!.headers).toMatchObject({
      "webhook-id": event.id,
      "webhook-signature": expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/),
      "content-type": "application/json",
      "user-agent": USER_AGENT,
    });
    expect(Number(request!.headers["webhook-timestamp"])).toBeGreaterThanOrEqual(before);
    expect(verifyWithLibrary(webhook.secret, request!)).toEqual({ type: event.type, timestamp: event.timestamp, data: event.data });

    // The same library refuses a changed body, another secret, and another id.
    expect(() => verifyWithLibrary(webhook.secret, { ...request!, body: request!.body.replace("9.99", "0.01") })).toThrow();
    const otherSecret = (await newWebhook()).secret;
    expect(() => verifyWithLibrary(otherSecret, request!)).toThrow();
    expect(() => verifyWithLibrary(webhook.secret, { ...request!, headers: { ...request!.headers, "webhook-id": "evt_other" } })).toThrow();

    expect(await attemptsOf(webhook.id)).toEqual([
      expect.objectContaining({ eventId: event.id, type: "price.changed", attempt: 1, statusCode: 200, error: null, outcome: "delivered" }),
    ]);
  });

  it("any 2xx is success", async () => {
    const webhook = await newWebhook();
    receiver.respond(webhook.url, () => new Response(null, { status: 204 }));
    const result = await runQueue([deliveryTo(webhook.id)]);
    expect(result.explicitAcks).toEqual(result.ids);
    expect((await attemptsOf(webhook.id))[0]).toMatchObject({ statusCode: 204, outcome: "delivered" });
  });
});

describe("failures are retried on the schedule, with the same webhook-id", () => {
  /**
   * Runs attempts 1…MAX_ATTEMPTS of one message as the queue would redeliver it: the first by the consumer; then,
   * the endpoint failing, each by the webhook's object, which the consumer hands the message to and which queues
   * the next retry itself (sendBatch, captured). Returns the delay asked before each retry.
   */
  async function everyAttempt(webhookId: string) {
    const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    const retries = () => sent.mock.calls.flatMap(([batch]) => [...batch]);
    const message = deliveryTo(webhookId);
    const first = await runQueue([message], 1);
    expect(first.explicitAcks).toEqual([]);
    expect(first.retryMessages).toHaveLength(1);
    const delays = [first.retryMessages[0]!.delaySeconds];
    let next: { body: WebhookMessage; attempts: number } = { body: message, attempts: 2 };
    for (let attempt = 2; attempt <= MAX_ATTEMPTS; attempt++) {
      const handed = await runQueue([next.body], next.attempts);
      expect(handed.explicitAcks).toEqual(handed.ids);
      await settled(async () => expect(await attemptsOf(webhookId)).toHaveLength(attempt));
      if (attempt === MAX_ATTEMPTS) break;
      await settled(() => expect(retries()).toHaveLength(attempt - 1));
      const retry = retries().at(-1)!;
      expect(retry.body).toMatchObject({ kind: "delivery", webhook_id: webhookId, attempts_before: attempt });
      delays.push(retry.delaySeconds);
      next = { body: retry.body as WebhookMessage, attempts: 1 };
    }
    const retriesFromObjects = retries().length;
    sent.mockRestore();
    return { message, delays, retriesFromObjects };
  }

  const inJitterRange = (delay: number | undefined, base: number) => {
    expect(delay).toBeGreaterThanOrEqual(Math.round(base * (1 - JITTER)));
    expect(delay).toBeLessThanOrEqual(Math.min(43_200, Math.round(base * (1 + JITTER))));
  };

  it("a 500: growing delays, each ≤ 12 h; then recorded as failed, and nothing more is queued", async () => {
    const webhook = await newWebhook();
    receiver.respond(webhook.url, () => new Response("boom", { status: 500 }));
    const { message, delays, retriesFromObjects } = await everyAttempt(webhook.id);

    expect(delays).toHaveLength(MAX_ATTEMPTS - 1);
    for (const [i, delay] of delays.entries()) inJitterRange(delay, RETRY_DELAYS_SECONDS[i]!);
    for (let i = 1; i < 6; i++) expect(delays[i]).toBeGreaterThan(delays[i - 1]!); // the jitter ranges do not overlap up to 10 h
    expect(retriesFromObjects).toBe(MAX_ATTEMPTS - 2); // none after the last attempt

    const requests = receiver.to(webhook.url);
    expect(requests).toHaveLength(MAX_ATTEMPTS);
    expect(new Set(requests.map((r) => r.headers["webhook-id"]))).toEqual(new Set([message.event.id]));
    for (const request of requests) expect(verifyWithLibrary(webhook.secret, request)).toMatchObject({ type: "price.changed" });

    const attempts = await attemptsOf(webhook.id);
    expect(attempts.map((a) => [a.attempt, a.statusCode, a.error, a.outcome])).toEqual(
      Array.from({ length: MAX_ATTEMPTS }, (_, i) => [
        i + 1,
        500,
        "The endpoint answered 500.",
        i + 1 < MAX_ATTEMPTS ? "retrying" : "failed",
      ]),
    );
    const { deliveries } = await expectJson(await call("GET", `/webhooks/${webhook.id}/deliveries`, { token }), 200);
    expect(deliveries[0]).toMatchObject({ event_id: message.event.id, attempt: MAX_ATTEMPTS, status_code: 500, outcome: "failed" });
    expect(await statusOf(webhook)).toMatchObject({ status: "enabled" }); // failing is not 410: the webhook stays
  });

  it(`a timeout (no answer within ${DELIVERY_TIMEOUT_MS / 1000} s, then ${PROBE_TIMEOUT_MS / 1000} s once failing): retried the same way, recorded without a status`, async () => {
    const webhook = await newWebhook();
    receiver.respond(webhook.url, hang);
    // The delivery's signal is AbortSignal.timeout(15 000, or 5 000 for a probe); here it fires at once.
    const realTimeout = AbortSignal.timeout.bind(AbortSignal);
    const timeouts = vi.spyOn(AbortSignal, "timeout").mockImplementation((ms) => {
      if (ms !== DELIVERY_TIMEOUT_MS && ms !== PROBE_TIMEOUT_MS) return realTimeout(ms);
      const controller = new AbortController();
      setTimeout(() => controller.abort(new DOMException("The operation timed out.", "TimeoutError")), 1);
      return controller.signal;
    });
    const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    try {
      const message = deliveryTo(webhook.id);
      const first = await runQueue([message], 1);
      await runQueue([message], 2); // failing now: made by the webhook's object
      await settled(() => expect(sent).toHaveBeenCalledTimes(1));
      expect(timeouts).toHaveBeenCalledWith(DELIVERY_TIMEOUT_MS);
      expect(timeouts).toHaveBeenCalledWith(PROBE_TIMEOUT_MS);
      inJitterRange(first.retryMessages[0]?.delaySeconds, RETRY_DELAYS_SECONDS[0]);
      inJitterRange([...sent.mock.calls[0]![0]][0]!.delaySeconds, RETRY_DELAYS_SECONDS[1]);
      expect(receiver.to(webhook.url).map((r) => r.headers["webhook-id"])).toEqual([message.event.id, message.event.id]);
      expect((await attemptsOf(webhook.id)).map((a) => [a.attempt, a.statusCode, a.error, a.outcome])).toEqual([
        [1, null, "No response within 15 s.", "retrying"],
        [2, null, "No response within 5 s.", "retrying"],
      ]);
    } finally {
      timeouts.mockRestore();
      sent.mockRestore();
    }
  });

  it("a network error, an unreachable host, and a redirect (not followed), are failures too", async () => {
    const broken = await newWebhook();
    receiver.respond(broken.url, () => {
      throw new TypeError("Network connection lost.");
    });
    // What workerd's fetch says of a host it cannot resolve or connect to.
    const unreachable = await newWebhook();
    receiver.respond(unreachable.url, () => {
      throw new Error("internal error; reference = 0123456789abcdef");
    });
    const moved = await newWebhook();
    receiver.respond(moved.url, () => new Response(null, { status: 301, headers: { Location: "http://127.0.0.1/" } }));
    const result = await runQueue([deliveryTo(broken.id), deliveryTo(unreachable.id), deliveryTo(moved.id)]);
    expect(result.retryMessages.map((r) => r.msgId).sort()).toEqual([...result.ids].sort());
    expect((await attemptsOf(broken.id))[0]).toMatchObject({
      statusCode: null,
      error: `Could not reach the host ${new URL(broken.url).host} (Network connection lost).`,
      outcome: "retrying",
    });
    expect((await attemptsOf(unreachable.id))[0]).toMatchObject({
      statusCode: null,
      error: `Could not reach the host ${new URL(unreachable.url).host}.`,
      outcome: "retrying",
    });
    expect((await attemptsOf(moved.id))[0]).toMatchObject({ statusCode: 301, outcome: "retrying" });
    expect(receiver.to(moved.url)).toHaveLength(1); // the Location was not fetched (it would be a stray request)
  });
});

describe("a 410 Gone", () => {
  it("disables the webhook: recorded, acked, no retry, and later deliveries are dropped unsent", async () => {
    const webhook = await newWebhook();
    receiver.respond(webhook.url, () => new Response("gone", { status: 410 }));
    const result = await runQueue([deliveryTo(webhook.id)]);
    expect(result.explicitAcks).toEqual(result.ids);
    expect(result.retryMessages).toEqual([]);
    expect(await statusOf(webhook)).toMatchObject({
      status: "disabled",
      disabled_at: expect.any(String),
      disabled_reason: "The endpoint answered 410 Gone.",
    });
    expect((await attemptsOf(webhook.id)).map((a) => [a.statusCode, a.outcome])).toEqual([[410, "disabled"]]);

    const later = await runQueue([deliveryTo(webhook.id)]);
    expect(later.explicitAcks).toEqual(later.ids);
    expect(receiver.to(webhook.url)).toHaveLength(1);
    expect((await db().select().from(webhooks).where(eq(webhooks.id, webhook.id)).get())!.status).toBe("disabled");
  });
});

describe("a batch", () => {
  it(`delivers its messages concurrently, at most ${MAX_OPEN_CONNECTIONS} at a time (a Worker's connection limit)`, async () => {
    const hooks = await Promise.all(Array.from({ length: 9 }, () => newWebhook()));
    let inFlight = 0;
    let most = 0;
    // Receivers answer once the limit is reached, not after a time of their own: on a loaded machine the sixth might
    // start only after a fixed wait had let the first answer. The 10 s guard only ends a batch sent one at a time.
    let full: () => void = () => {};
    const limitReached = new Promise<void>((resolve) => (full = resolve));
    for (const hook of hooks) {
      receiver.respond(hook.url, async () => {
        most = Math.max(most, ++inFlight);
        if (inFlight === MAX_OPEN_CONNECTIONS) full();
        await Promise.race([limitReached, new Promise((resolve) => setTimeout(resolve, 10_000))]);
        inFlight--;
        return new Response("ok");
      });
    }
    const result = await runQueue(hooks.map((hook) => deliveryTo(hook.id)));
    expect(result.explicitAcks.sort()).toEqual([...result.ids].sort());
    expect(most).toBe(MAX_OPEN_CONNECTIONS); // 6 waiting receivers at once: not one after another
  });

  it("one slow receiver does not hold up the others' answers", async () => {
    const [slow, fast] = await Promise.all([newWebhook(), newWebhook()]);
    let fastAnsweredWhileSlowWaited = false;
    let slowAnswered = false;
    let release: () => void = () => {};
    const slowDone = new Promise<void>((resolve) => (release = resolve));
    // The slow receiver answers when the fast one has; the 10 s guard only ends a batch sent one after the other.
    receiver.respond(slow.url, async () => {
      await Promise.race([slowDone, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      slowAnswered = true;
      return new Response("ok");
    });
    receiver.respond(fast.url, () => {
      fastAnsweredWhileSlowWaited = !slowAnswered;
      release();
      return new Response("ok");
    });
    await runQueue([deliveryTo(slow.id), deliveryTo(fast.id)]);
    expect(fastAnsweredWhileSlowWaited).toBe(true);
  });

  it("acks and logs a message that is not valid (retrying cannot fix it)", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const result = await runQueue([{ kind: "delivery", webhook_id: "whk_x" }, { kind: "other" }, "text"]);
      expect(result.explicitAcks.sort()).toEqual([...result.ids].sort());
      expect(errors).toHaveBeenCalledTimes(3);
    } finally {
      errors.mockRestore();
    }
  });
});

describe("deliveries and the rate limiter", () => {
  it("never touch it: no rate-limit object is called or created, and a key's remaining count is unchanged", async () => {
    const key = (await freshAccount({ plan: "premium" })).key;
    const hooks = await Promise.all([newWebhook(), newWebhook()]);
    const before = rateLimitOf(await call("GET", "/competitors", { token: key }));
    const objects = await rateLimitObjects();

    const result = await runQueue(hooks.flatMap((hook) => [deliveryTo(hook.id), deliveryTo(hook.id, testEvent("stock.changed"))]));
    expect(result.explicitAcks).toHaveLength(4);
    expect(receiver.received.filter((r) => hooks.some((hook) => hook.url === r.url))).toHaveLength(4);
    expect(await rateLimitObjects()).toBe(objects);

    const after = rateLimitOf(await call("GET", "/competitors", { token: key }));
    expect(after.remaining).toBe(before.remaining! - 1); // only the second GET counted
  });
});

describe("the deliveries listing", () => {
  it("carries the body each attempt sent while its event is in D1, and null once it has left", async () => {
    const webhook = await newWebhook();
    receiver.respond(webhook.url, () => new Response("ok"));
    const kept = testEvent("price.changed", { sku: "BODY-1", new_price: "12.50", name: "Café ☕ — 2 × 500 g" });
    const gone = testEvent("stock.changed", { sku: "BODY-2" }); // never in the events table, as after archiving
    await storeEvents([{ kind: "event", event: kept }]);
    await runQueue([deliveryTo(webhook.id, kept), deliveryTo(webhook.id, gone)]);
    const { deliveries } = await expectJson(await call("GET", `/webhooks/${webhook.id}/deliveries`, { token }), 200);
    const of = (id: string) => deliveries.find((d) => d.event_id === id);
    const sent = receiver.to(webhook.url).find((request) => request.headers["webhook-id"] === kept.id)!;
    expect(of(kept.id)!.payload).toEqual(JSON.parse(sent.body)); // the very body the receiver got
    expect(of(kept.id)!.payload).toEqual({ type: kept.type, timestamp: kept.timestamp, data: kept.data });
    expect(of(gone.id)!.payload).toBeNull();
  });

  it("shows the latest attempts first, with the contract's fields", async () => {
    const webhook = await newWebhook();
    receiver.respond(webhook.url, () => new Response("no", { status: 503 }));
    const message = deliveryTo(webhook.id);
    await runQueue([message], 1);
    await runQueue([message], 2); // failing now: made by the webhook's object
    await settled(async () => expect(await attemptsOf(webhook.id)).toHaveLength(2));
    const { webhook_id, deliveries } = await expectJson(await call("GET", `/webhooks/${webhook.id}/deliveries`, { token }), 200);
    expect(webhook_id).toBe(webhook.id);
    expect(deliveries.map((d) => d.attempt)).toEqual([2, 1]);
    expect(Object.keys(deliveries[0]!).sort()).toEqual([
      "attempt",
      "attempted_at",
      "delivered_at",
      "duration_ms",
      "error",
      "event_id",
      "outcome",
      "payload",
      "response_excerpt",
      "status_code",
      "type",
    ]);
    const newest = await db()
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.webhookId, webhook.id))
      .orderBy(desc(webhookDeliveries.id))
      .get();
    expect(deliveries[0]!.attempted_at).toBe(newest!.deliveredAt);
    // Neither attempt was delivered (503 twice): no delivery time, only the attempt's.
    expect(deliveries.map((d) => [d.outcome, d.delivered_at])).toEqual([
      ["retrying", null],
      ["retrying", null],
    ]);
  });
});
