import { env } from "cloudflare:workers";
import { desc, eq, gte } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, type MockInstance, vi } from "vitest";
import type { DeliveryMessage, WebhookMessage } from "../../src/events/messages.ts";
import { isoTimestamp } from "../../src/http/query.ts";
import { database } from "../../src/platform/db.ts";
import { events, webhookDeliveries } from "../../src/platform/tables.ts";
import { MAX_ATTEMPTS } from "../../src/webhooks/delivery/schedule.ts";
import { replayBody } from "../../src/webhooks/schema.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, ingest, runQueue } from "../helpers/webhooks.ts";

/** POST /webhooks/:id/replay: stored events sent again to one webhook, with their original ids. */

const db = () => database(env.DB);
let receiver: Receiver;
let sent: MockInstance<Queue<WebhookMessage>["sendBatch"]>;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(() => {
  sent?.mockRestore();
  receiver.assertNoStrayRequests();
});
afterAll(() => vi.restoreAllMocks());

/** Watches what goes to the queue, without passing it on: the test runs the consumer itself. */
function captureSends() {
  sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
  return () => sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => m.body as DeliveryMessage));
}

let skus = 0;
/** Ingests price changes of `steps` (prices in minor units) for a new product; returns the stored events, oldest first. */
async function priceChanges(steps: number[], inStockLast = true) {
  const since = new Date().toISOString();
  const sku = `REPLAY-${Date.now()}-${++skus}`;
  for (const [i, minor] of steps.entries())
    await ingest([{ sku, price: (minor / 100).toFixed(2), in_stock: i < steps.length - 1 || inStockLast }]);
  const rows = await db().select().from(events).where(gte(events.timestamp, since)).orderBy(events.seq).all();
  return { since, rows: rows.filter((row) => row.payload.includes(sku)) };
}

const replay = (token: string, id: string, body: unknown) => call("POST", `/webhooks/${id}/replay`, { token, body });

describe("POST /webhooks/:id/replay", () => {
  it("queues the events the webhook takes (its types and min_change_pct), to it alone, with their original ids", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl(), events: ["price.changed"], min_change_pct: 15 });
    const sentNow = captureSends();
    const { since, rows } = await priceChanges([1000, 1100, 1500, 1500], false); // +10 %, +36 %, then a stock change
    expect(rows.map((r) => r.type)).toEqual(["price.changed", "price.changed", "stock.changed"]);
    sent.mockClear();

    expect(await expectJson(await replay(token, hook.id, { since }), 202)).toMatchObject({ queued: 1, held_back: 0 });
    const messages = sentNow();
    expect(messages).toEqual([
      {
        kind: "delivery",
        webhook_id: hook.id,
        event: {
          id: rows[1]!.id,
          type: "price.changed",
          timestamp: rows[1]!.timestamp,
          data: expect.objectContaining({ event_id: rows[1]!.id, new_price: "15.00" }),
        },
      },
    ]);

    // until is exclusive: before the second change, nothing.
    expect(await expectJson(await replay(token, hook.id, { since, until: rows[1]!.timestamp }), 202)).toMatchObject({
      queued: 0,
      held_back: 0,
    });
  });

  it("only_failed: the events whose last delivery failed for good, or that never reached it; not those delivered or still retrying", async () => {
    const token = (await freshAccount()).token;
    captureSends();
    const { since, rows } = await priceChanges([1000, 1100, 1200, 1300, 1400]);
    // Created after the changes, so none reached it right after its commit: its deliveries are the ones this test makes.
    const hook = await createWebhook(token, { url: hookUrl(), events: ["price.changed"] });
    const [delivered, failed, retrying, never] = rows.map((row) =>
      deliveryTo(hook.id, { id: row.id, type: row.type, timestamp: row.timestamp, data: JSON.parse(row.payload).data }),
    );
    await runQueue([delivered!]);
    receiver.respond(hook.url, () => new Response("down", { status: 503 }));
    await runQueue([failed!], MAX_ATTEMPTS); // the last attempt: recorded as failed
    await runQueue([retrying!], 1); // the endpoint is failing: its object makes this one
    expect(never).toBeDefined();
    await settled(async () => {
      const outcomes = await db()
        .select({ event: webhookDeliveries.eventId, outcome: webhookDeliveries.outcome })
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.webhookId, hook.id))
        .orderBy(desc(webhookDeliveries.id))
        .all();
      expect(outcomes.map((o) => o.outcome)).toEqual(["retrying", "failed", "delivered"]);
    });

    sent.mockClear();
    expect(await expectJson(await replay(token, hook.id, { since, only_failed: true }), 202)).toMatchObject({ queued: 2, held_back: 0 });
    const sentIds = sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => (m.body as DeliveryMessage).event.id));
    expect(sentIds).toEqual([failed!.event.id, never!.event.id]);
    expect(await expectJson(await replay(token, hook.id, { since }), 202)).toMatchObject({ queued: 4, held_back: 0 });
  });

  it.each([
    [{}, "since"],
    [{ since: "yesterday" }, "since"],
    [{ since: "2026-01-02T00:00:00Z", until: "2026-01-01T00:00:00Z" }, "until"],
    [{ since: "2026-01-01T00:00:00Z", only_failed: "yes" }, "only_failed"],
    [{ since: "2026-01-01T00:00:00Z", webhook: "x" }, "webhook"],
  ])("400 for %j, naming %s; nothing queued", async (body, field) => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    captureSends();
    const { detail } = await expectJson(await replay(token, hook.id, body), 400);
    expect(detail).toContain(field);
    expect(sent).not.toHaveBeenCalled();
  });

  it("since and until follow the API's one ISO-8601 rule (isoTimestamp's): a date alone is midnight UTC", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    captureSends();
    const today = new Date().toISOString().slice(0, 10);
    expect(await expectJson(await replay(token, hook.id, { since: "2026-01-01", until: today }), 202)).toMatchObject({
      queued: expect.any(Number),
      held_back: 0,
    });
    for (const input of [
      "2026-01-31",
      "2026-01-31T12:00:00Z",
      "2026-01-31T12:00:00.5+02:00",
      "2026-01-31T12:00:00",
      "2026-02-30",
      "2026-01-31T25:00:00Z",
      "31/01/2026",
      "",
    ]) {
      const asTimestamp = isoTimestamp.safeParse(input);
      const asReplay = replayBody.safeParse({ since: input });
      expect(asReplay.success, input).toBe(asTimestamp.success);
      if (asReplay.success) expect(asReplay.data.since).toBe(asTimestamp.data);
    }
  });

  it("404 for another account's webhook; 409 for a disabled one", async () => {
    const [alice, bob] = await Promise.all([freshAccount().then((a) => a.token), freshAccount().then((a) => a.token)]);
    const hook = await createWebhook(alice, { url: hookUrl() });
    captureSends();
    await expectJson(await replay(bob, hook.id, { since: "2026-01-01T00:00:00Z" }), 404);
    await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token: alice, body: { status: "disabled" } }), 200);
    const { detail } = await expectJson(await replay(alice, hook.id, { since: "2026-01-01T00:00:00Z" }), 409);
    expect(detail).toContain("PATCH");
    expect(sent).not.toHaveBeenCalled();
  });
});
