import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { archiveHistory } from "../../src/catalogue/history-archive.ts";
import type { EventMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { DAY_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct } from "../helpers/catalogue-factory.ts";
import { call, expectJson, workCounts } from "../helpers/http.ts";
import { statementsOf } from "../helpers/statements.ts";
import { hookUrl, installReceiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, storeEvents, testEvent } from "../helpers/webhooks.ts";

/**
 * new_low_days / new_high_days are answered per page of events, not per event: the D1 statements and the R2 reads of
 * archived history a replay makes do not grow with its number of events (issue 32, finding 8).
 */

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

beforeAll(async () => {
  installReceiver();
  vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
  await createCompetitor({ id: "cmp_windows", name: "Windows" });
  await createProduct({ id: "prd_windows", sku: "WINDOWS" });
  // 10.00 twenty days ago, archived to R2: the 30-day window's low. The price it held before (12.00) opens older windows.
  await addHistory("prd_windows", [
    { competitor: "cmp_windows", price: "12.00", observedAt: ago(400 * DAY_MS) },
    { competitor: "cmp_windows", price: "10.00", observedAt: ago(20 * DAY_MS) },
  ]);
  await archiveHistory(database(env.DB), database(env.ALERTS_DB), env.ARCHIVE);
});
afterAll(() => vi.restoreAllMocks());

/** `count` price changes of the offer in the last hours: odd ones to 9.00 (a new 30-day low), even ones to 11.00. */
async function storeChanges(count: number, from: number) {
  const messages: EventMessage[] = Array.from({ length: count }, (_, i) => {
    const newMinor = (from + i) % 2 === 1 ? 900 : 1100;
    return {
      kind: "event",
      event: testEvent("price.changed", {
        product_id: "prd_windows",
        sku: "WINDOWS",
        competitor_id: "cmp_windows",
        currency: "USD",
        old_price: "10.00",
        new_price: (newMinor / 100).toFixed(2),
        observed_at: ago((from + i) * MINUTE_MS),
      }),
      price_change: { old_minor: 1000, new_minor: newMinor },
    };
  });
  // 10 rows a statement: D1 allows 100 bound parameters.
  for (let i = 0; i < messages.length; i += 10) await storeEvents(messages.slice(i, i + 10));
}

describe("a replay with new_low_days over archived history", () => {
  it("makes the same D1 statements and R2 reads for 600 events as for 60, and takes the same events", async () => {
    const { token } = await freshAccount();
    const hook = await createWebhook(token, { url: hookUrl("windows"), filters: { new_low_days: 30 } });
    const r2Gets = vi.spyOn(env.ARCHIVE, "get");
    const replay = async () => {
      r2Gets.mockClear();
      let response: Response | undefined;
      const statements = await statementsOf(async () => {
        response = await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since: ago(DAY_MS) } });
      });
      const { queued } = await expectJson<Schemas["ReplayQueued"]>(response!, 202);
      return { queued, d1: workCounts(response!).d1, statements: statements.length, r2Reads: r2Gets.mock.calls.length };
    };

    await storeChanges(60, 0);
    const sixty = await replay();
    await storeChanges(540, 60);
    const sixHundred = await replay();
    console.log(`replay with new_low_days: 30: 60 events ${JSON.stringify(sixty)}, 600 events ${JSON.stringify(sixHundred)}`);
    expect([sixty.queued, sixHundred.queued]).toEqual([30, 300]);
    expect(sixHundred.d1).toBe(sixty.d1);
    expect(sixHundred.statements).toBe(sixty.statements);
    expect(sixHundred.r2Reads).toBe(sixty.r2Reads);
    expect(sixHundred.d1).toBeLessThanOrEqual(10);
  });
});
