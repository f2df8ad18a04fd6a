import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { archiveEvents } from "../../src/events/archive.ts";
import type { DeliveryMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { webhookDeliveries } from "../../src/platform/tables.ts";
import { HOUR_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, expectJson } from "../helpers/http.ts";
import { hookUrl, installReceiver } from "../helpers/webhook-receiver.ts";
import { createWebhook } from "../helpers/webhooks.ts";

/** POST /webhooks/:id/replay reads archived events (R2) and the last day (D1) as one span, with the same rules. */

const db = () => database(env.DB);

beforeAll(() => {
  installReceiver();
});
afterEach(() => vi.restoreAllMocks());

function captureSends() {
  const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
  return () => sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => (m.body as DeliveryMessage).event.id));
}

const since = (hoursAgo: number) => new Date(Date.now() - hoursAgo * HOUR_MS).toISOString();

describe("replay across the archive", () => {
  it("sends the archived and recent events the webhook takes, in commit order, once; only_failed reads the archived ones' deliveries", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl(), events: ["price.changed"], min_change_pct: 15 });
    // +20 %, +5 % (below the threshold), +50 %; a stock change the webhook does not take.
    const archived = await commitEvents(50, 3, {
      prices: [
        [1000, 1200],
        [1000, 1050],
        [1000, 1500],
      ],
    });
    await commitEvents(40, 1, { type: "stock.changed" });
    const alsoArchived = await commitEvents(30, 2, {
      prices: [
        [2000, 1000],
        [2000, 2100],
      ],
    });
    await archiveEvents(db(), env.ARCHIVE);
    const recent = await commitEvents(2, 2, {
      prices: [
        [1000, 2000],
        [1000, 1010],
      ],
    });
    const takes = [archived[0]!, archived[2]!, alsoArchived[0]!, recent[0]!];

    const sent = captureSends();
    expect(await expectJson(await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since: since(72) } }), 202)).toMatchObject({
      queued: 4,
      held_back: 0,
    });
    expect(sent()).toEqual(takes);
    // A span inside the archive, and one across the boundary.
    vi.restoreAllMocks();
    const inside = captureSends();
    expect(
      await expectJson(await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since: since(55), until: since(35) } }), 202),
    ).toMatchObject({ queued: 2, held_back: 0 });
    expect(inside()).toEqual(takes.slice(0, 2));

    // Delivered, and still retrying: received; failed for good: not.
    const attempt = (eventId: string, outcome: "delivered" | "retrying" | "failed") => ({
      eventId,
      webhookId: hook.id,
      type: "price.changed",
      attempt: 1,
      durationMs: 5,
      outcome,
      deliveredAt: since(1),
    });
    await db()
      .insert(webhookDeliveries)
      .values([attempt(takes[0]!, "delivered"), attempt(takes[1]!, "failed"), attempt(takes[2]!, "retrying")]);
    vi.restoreAllMocks();
    const failed = captureSends();
    expect(
      await expectJson(await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since: since(72), only_failed: true } }), 202),
    ).toMatchObject({ queued: 2, held_back: 0 });
    expect(failed()).toEqual([takes[1], takes[3]]);
  });
});
