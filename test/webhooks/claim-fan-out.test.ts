import { env } from "cloudflare:workers";
import { inArray } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { DeliveryMessage, EventMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { newId } from "../../src/platform/ids.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { events } from "../../src/platform/tables.ts";
import { accountBudgets } from "../../src/rate-limit/stub.ts";
import { sandboxFactsOf } from "../../src/sandbox/facts.ts";
import { accountSandbox } from "../../src/sandbox/stub.ts";
import { claimAndFanOut } from "../../src/webhooks/delivery/fan-out.ts";
import { storeEvents } from "../helpers/webhooks.ts";

/**
 * Claim → fan out → mark (src/webhooks/delivery/fan-out.ts), the one sequence the first delivery and the queue's consumer
 * both run: of two paths given the same events at once, one sends them and marks them done; a failure leaves them
 * claimed but not done, and says which it claimed, so the path that failed can hand them back.
 */

const db = () => database(env.DB);
const work = new WorkMeter();
const sources = () => ({
  db: db(),
  alerts: database(env.ALERTS_DB),
  budgets: accountBudgets(env.RATE_LIMIT_BUCKETS, work),
  sandboxFacts: sandboxFactsOf((accountId) => accountSandbox(env.SANDBOX, work, accountId)),
});
const anEvent = (): EventMessage => ({
  kind: "event",
  event: { id: newId("evt"), type: "price.changed", timestamp: new Date().toISOString(), data: {} },
  price_change: { old_minor: 1000, new_minor: 900 },
});
const rowsOf = (ids: string[]) =>
  db().select({ claimedAt: events.claimedAt, fannedOutAt: events.fannedOutAt }).from(events).where(inArray(events.id, ids)).all();

describe("claim, fan out, mark", () => {
  it("fans each event out once when two paths are given it at once, and marks it done", async () => {
    const batch = [anEvent(), anEvent()];
    await storeEvents(batch);
    const sends: DeliveryMessage[][] = [];
    const send = async (deliveries: DeliveryMessage[]) => void sends.push(deliveries);
    const outcomes = await Promise.all([
      claimAndFanOut(sources(), batch, { inOutbox: true, send }),
      claimAndFanOut(sources(), [...batch, batch[0]!], { inOutbox: true, send }),
    ]);
    expect(outcomes.map((outcome) => outcome.status).sort()).toEqual(["claimed-elsewhere", "sent"]);
    expect(sends).toHaveLength(1);
    const ids = batch.map((message) => message.event.id);
    expect((await rowsOf(ids)).every((row) => row.fannedOutAt !== null)).toBe(true);
  });

  it("returns what it claimed when sending fails, and leaves those events claimed, not done", async () => {
    const batch = [anEvent()];
    await storeEvents(batch);
    const outcome = await claimAndFanOut(sources(), batch, {
      inOutbox: true,
      send: () => Promise.reject(new Error("injected: the queue is down")),
    });
    expect(outcome).toMatchObject({ status: "failed", claimed: [batch[0]!.event.id] });
    expect(await rowsOf([batch[0]!.event.id])).toEqual([{ claimedAt: expect.any(String), fannedOutAt: null }]);
  });

  it("claims and marks nothing for events in no outbox (a sandbox's): their one fan-out is this one", async () => {
    const message = { ...anEvent(), sandbox_account_id: newId("acct") };
    const outcome = await claimAndFanOut(sources(), [message], { inOutbox: false, send: async () => {} });
    expect(outcome.status).toBe("sent");
    expect(await rowsOf([message.event.id])).toEqual([]);
  });
});
