import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { database } from "../../src/platform/db.ts";
import { webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { DAY_MS } from "../../src/platform/time.ts";
import { EXCERPT_BYTES, utf8Excerpt } from "../../src/webhooks/delivery/excerpt.ts";
import { FAILING_DAYS_TO_DISABLE, recordAttempts, webhooksByIds } from "../../src/webhooks/delivery/rows.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, pendingAtEndpoint, runEndpointNow, runQueue } from "../helpers/webhooks.ts";

/** The 5-day rule (with a fake clock), what disabling does to pending retries, and the response excerpts of delivery records. */

let receiver: Receiver;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(() => {
  vi.useRealTimers();
  receiver.assertNoStrayRequests();
});
afterAll(() => vi.restoreAllMocks());

const at = (ms: number) => vi.setSystemTime(ms);

/**
 * A delivery attempt at the (fake) time: made by the consumer while the endpoint is not failing, else handed to the
 * webhook's object, whose alarm is run here: set at the fake time, it would not come by itself. Its retry stays
 * in the queue (captured).
 */
async function attemptAt(webhookId: string, attempt = 1, deliveries = 1) {
  const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
  try {
    await runQueue(
      Array.from({ length: deliveries }, () => deliveryTo(webhookId)),
      attempt,
    );
    await runEndpointNow(webhookId);
  } finally {
    sent.mockRestore();
  }
}
/** Read from D1: under the fake clock, days later, the test's login token has expired. */
const statusOf = async (_token: string, id: string) => {
  const row = (await database(env.DB).select().from(webhooks).where(eq(webhooks.id, id)).get())!;
  return { status: row.status, disabled_reason: row.disabledReason };
};

/** The outcomes of a webhook's deliveries, newest first, as GET /webhooks/{id}/deliveries lists them. */
async function outcomesOf(token: string, id: string): Promise<string[]> {
  const { deliveries } = await expectJson(await call("GET", `/webhooks/${id}/deliveries`, { token }), 200);
  return deliveries.map((delivery) => delivery.outcome);
}

/** A retry still queued for a disabled webhook: acked, nothing sent, nothing recorded. */
async function expectDroppedUnsent(hook: { id: string; url: string }) {
  const sentBefore = receiver.to(hook.url).length;
  const rowsBefore = await database(env.DB).$count(webhookDeliveries, eq(webhookDeliveries.webhookId, hook.id));
  const retry = await runQueue([deliveryTo(hook.id)], 2);
  expect(retry.explicitAcks).toEqual(retry.ids);
  // Nor handed to the webhook's object, whose alarm would send it if the webhook were enabled again by then.
  expect(await pendingAtEndpoint(hook.id)).toBe(0);
  expect(receiver.to(hook.url)).toHaveLength(sentBefore);
  expect(await database(env.DB).$count(webhookDeliveries, eq(webhookDeliveries.webhookId, hook.id))).toBe(rowsBefore);
}

/** A new webhook whose endpoint answers 500, its first attempt made now, with the clock faked from now on. */
async function failingSince() {
  const token = (await freshAccount()).token;
  const hook = await createWebhook(token, { url: hookUrl() });
  receiver.respond(hook.url, () => new Response("down", { status: 500 }));
  const start = Date.now();
  vi.useFakeTimers({ toFake: ["Date"], now: start });
  await attemptAt(hook.id);
  return { token, hook, start };
}

describe(`a webhook whose deliveries all fail for ${FAILING_DAYS_TO_DISABLE} days`, () => {
  it("is disabled, with a reason that says so; up to then it stays enabled", async () => {
    const { token, hook, start } = await failingSince();
    at(start + 4 * DAY_MS);
    await attemptAt(hook.id, 3);
    at(start + FAILING_DAYS_TO_DISABLE * DAY_MS - 60_000);
    await attemptAt(hook.id, 5);
    expect(await statusOf(token, hook.id)).toMatchObject({ status: "enabled", disabled_reason: null });

    at(start + FAILING_DAYS_TO_DISABLE * DAY_MS + 1000);
    await attemptAt(hook.id, 6);
    const disabled = await statusOf(token, hook.id);
    expect(disabled).toMatchObject({
      status: "disabled",
      disabled_reason: `Every delivery has failed for ${FAILING_DAYS_TO_DISABLE} days (since ${new Date(start).toISOString()}).`,
    });

    // Its retries are abandoned: nothing shows a next retry.
    vi.useRealTimers();
    expect(await outcomesOf(token, hook.id)).toEqual(["abandoned", "abandoned", "abandoned", "abandoned"]);
    await expectDroppedUnsent(hook);

    // Enabling starts the clock again: the next failure does not disable it.
    await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "enabled" } }), 200);
    await attemptAt(hook.id);
    expect(await statusOf(token, hook.id)).toMatchObject({ status: "enabled" });
  });

  it("its object's run stops at the probe that disables it: the deliveries behind that probe are not sent", async () => {
    const { token, hook, start } = await failingSince();
    at(start + FAILING_DAYS_TO_DISABLE * DAY_MS + 1000);
    await attemptAt(hook.id, 2, 4); // one run of the object: probes one at a time, each answered 500
    expect(await statusOf(token, hook.id)).toMatchObject({ status: "disabled" });
    expect(receiver.to(hook.url)).toHaveLength(2);
    expect(await pendingAtEndpoint(hook.id)).toBe(0);
    vi.useRealTimers();
    expect(await outcomesOf(token, hook.id)).toEqual(["abandoned", "abandoned"]);
  });

  it("a success in between starts the count again", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    let fail = true;
    receiver.respond(hook.url, () => new Response(fail ? "down" : "ok", { status: fail ? 500 : 200 }));
    const start = Date.now();
    vi.useFakeTimers({ toFake: ["Date"], now: start });
    await attemptAt(hook.id);
    at(start + 3 * DAY_MS);
    fail = false;
    await attemptAt(hook.id);
    fail = true;
    at(start + 4 * DAY_MS);
    await attemptAt(hook.id);
    at(start + 6 * DAY_MS);
    await attemptAt(hook.id, 2);
    expect(await statusOf(token, hook.id)).toMatchObject({ status: "enabled" }); // failing since day 4: 2 days
    at(start + 9 * DAY_MS + 1000);
    await attemptAt(hook.id, 3);
    expect(await statusOf(token, hook.id)).toMatchObject({ status: "disabled" });
  });
});

describe("a delivery record's response_excerpt", () => {
  it(`keeps the first ${EXCERPT_BYTES} bytes of the answer, cut before a character that does not fit whole`, async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const body = `${"a".repeat(EXCERPT_BYTES - 1)}é and more after it`; // é takes bytes 1024 and 1025
    receiver.respond(hook.url, () => new Response(body, { status: 500 }));
    await runQueue([deliveryTo(hook.id)]);
    const { deliveries } = await expectJson(await call("GET", `/webhooks/${hook.id}/deliveries`, { token }), 200);
    expect(deliveries[0]!.response_excerpt).toBe("a".repeat(EXCERPT_BYTES - 1));
    const [row] = await database(env.DB).select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, hook.id)).all();
    expect(row!.responseExcerpt).toBe("a".repeat(EXCERPT_BYTES - 1));
  });

  it("is the whole answer when shorter, and null when there is none", async () => {
    const token = (await freshAccount()).token;
    const [short, empty] = await Promise.all([createWebhook(token, { url: hookUrl() }), createWebhook(token, { url: hookUrl() })]);
    receiver.respond(short.url, () => new Response('{"error":"bad sku ✓"}', { status: 422 }));
    receiver.respond(empty.url, () => new Response(null, { status: 204 }));
    await runQueue([deliveryTo(short.id), deliveryTo(empty.id)]);
    const excerpt = async (id: string) =>
      (await expectJson(await call("GET", `/webhooks/${id}/deliveries`, { token }), 200)).deliveries[0]!.response_excerpt;
    expect(await excerpt(short.id)).toBe('{"error":"bad sku ✓"}');
    expect(await excerpt(empty.id)).toBeNull();
  });

  it("utf8Excerpt never splits a character: 3- and 4-byte ones at the boundary", () => {
    const bytes = new TextEncoder().encode(`${"x".repeat(1022)}€🙂`); // € at 1022–1024, 🙂 after
    expect(utf8Excerpt(bytes)).toBe("x".repeat(1022));
    const exact = new TextEncoder().encode(`${"x".repeat(1021)}€🙂`); // € ends at byte 1023
    expect(utf8Excerpt(exact)).toBe(`${"x".repeat(1021)}€`);
  });
});

describe("a disabled webhook has no pending retry", () => {
  it("a 410 abandons the retries before it", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    let status = 500;
    receiver.respond(hook.url, () => new Response("no", { status }));
    await attemptAt(hook.id);
    expect(await outcomesOf(token, hook.id)).toEqual(["retrying"]);
    status = 410;
    await attemptAt(hook.id, 2);
    expect(await statusOf(token, hook.id)).toMatchObject({ status: "disabled" });
    expect(await outcomesOf(token, hook.id)).toEqual(["disabled", "abandoned"]);
    await expectDroppedUnsent(hook);
  });

  it("disabling by PATCH abandons its retries; enabling it again does not bring them back", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const other = await createWebhook(token, { url: hookUrl() });
    for (const { url } of [hook, other]) receiver.respond(url, () => new Response("down", { status: 503 }));
    await attemptAt(hook.id);
    await attemptAt(other.id);
    await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "disabled" } }), 200);
    expect(await outcomesOf(token, hook.id)).toEqual(["abandoned"]);
    expect(await outcomesOf(token, other.id)).toEqual(["retrying"]); // another webhook's retries are its own
    await expectDroppedUnsent(hook);
    await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "enabled" } }), 200);
    expect(await outcomesOf(token, hook.id)).toEqual(["abandoned"]);
  });

  it("an attempt recorded as retrying after another request disabled its webhook reads abandoned", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const db = database(env.DB);
    const known = await webhooksByIds(db, [hook.id]); // read while it was enabled, as a batch's attempts are
    await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "disabled" } }), 200);
    await recordAttempts(db, known, [
      {
        eventId: `evt_${"1".repeat(32)}`,
        webhookId: hook.id,
        type: "price.changed",
        attempt: 1,
        statusCode: 500,
        error: "The endpoint answered 500.",
        durationMs: 3,
        outcome: "retrying",
        deliveredAt: new Date().toISOString(),
        responseExcerpt: null,
      },
    ]);
    expect(await outcomesOf(token, hook.id)).toEqual(["abandoned"]);
  });
});
