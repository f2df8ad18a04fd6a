import { env } from "cloudflare:workers";
import { asc, like } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { archiveHistory } from "../../src/catalogue/history-archive.ts";
import type { DeliveryMessage } from "../../src/events/messages.ts";
import { eventMessageOf } from "../../src/events/outbox.ts";
import { database } from "../../src/platform/db.ts";
import { events, priceHistory } from "../../src/platform/tables.ts";
import { DAY_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { hookUrl, installReceiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, ingest, runQueue } from "../helpers/webhooks.ts";

/** new_low_days / new_high_days read the offer's history in R2 too, once the archive has moved it out of D1. */

const db = () => database(env.DB);

beforeAll(() => {
  installReceiver();
});
afterEach(() => vi.restoreAllMocks());

describe("alert rules over archived history", () => {
  it("a new 90-day low is judged against the archived prices, in the fan-out and in replay alike", async () => {
    const token = (await freshAccount()).token;
    const low = await createWebhook(token, { url: hookUrl("low"), filters: { new_low_days: 90 } });
    const sku = `ARCHIVED-LOW-${Date.now()}-ü`;
    const at = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY_MS).toISOString();
    vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    for (const [price, daysAgo] of [
      ["9.00", 60],
      ["12.00", 45],
      ["11.50", 5],
    ] as const)
      await ingest([{ sku, price, observed_at: at(daysAgo) }]);
    await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    expect(
      (await db().select().from(priceHistory).where(like(priceHistory.observedAt, "%"))).filter((row) => row.observedAt < at(2)),
    ).toEqual([]);
    await ingest([{ sku, price: "10.99", observed_at: at(0) }]);
    vi.restoreAllMocks();

    const rows = await db()
      .select()
      .from(events)
      .where(like(events.payload, `%${sku.slice(0, -1)}%`))
      .orderBy(asc(events.seq))
      .all();
    const last = rows.at(-1)!;
    const sends = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    const sentTo = () =>
      sends.mock.calls
        .flatMap(([batch]) => [...batch].map((m) => m.body as DeliveryMessage))
        .filter((m) => m.kind === "delivery" && m.webhook_id === low.id)
        .map((m) => m.event.id);
    await runQueue([eventMessageOf(last)]);
    expect(sentTo()).toEqual([]); // 9.00, 60 days ago and archived, is inside the 90 days: 10.99 is no new low
    sends.mockClear();
    await expectJson(await call("POST", `/webhooks/${low.id}/replay`, { token, body: { since: at(1) } }), 202);
    expect(sentTo()).toEqual([]);
  });
});
