import { env } from "cloudflare:workers";
import { asc, like } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { database } from "../../src/platform/db.ts";
import { events } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { decide as decideWith, type Step } from "../helpers/alert-decide.ts";
import { settled } from "../helpers/settle.ts";
import { openStream, readFrames } from "../helpers/stream-frames.ts";
import { installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * `compare` and `below_lowest_30d` (the contract's "Comparable prices"), each on both sides of its boundary, decided
 * alike by the fan-out and by replay (decide asserts the two agree), and by the stream's hub: one matcher.
 */

let receiver: Receiver;
beforeAll(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.assertNoStrayRequests());
afterAll(() => vi.restoreAllMocks());

const decide = (filters: unknown, steps: Step[]) => decideWith(receiver, filters, steps);

/** Price down while the total goes up (shipping rose), then price up while the total falls (free shipping). */
const shippingMoves: Step[] = [
  { price: "10.00", shipping_cost: "2.00" }, // total 12.00
  { price: "9.00", shipping_cost: "4.00" }, // total 13.00
  { price: "9.50", shipping_cost: "0" }, // total 9.50
];

/**
 * lowest_price_30d at each change, by hand: 8.00 (45 days ago) → 12.00 (35 days ago): lowest 8.00; → 10.00 (10 days
 * ago): 8.00 still held 35 days ago, inside the 30 days before → lowest 8.00, 10.00 is above it; → 11.00 (5 days
 * ago): up; → 9.50 (now): 8.00 ended 35 days ago, outside; 12.00 and 10.00 inside → lowest 10.00, 9.50 is below it;
 * → 9.00: the prices of the window are 10.00, 11.00, 9.50 → lowest 9.50, 9.00 is below it.
 */
const omnibus: Step[] = [
  { price: "8.00", daysAgo: 45 },
  { price: "12.00", daysAgo: 35 },
  { price: "10.00", daysAgo: 10 },
  { price: "11.00", daysAgo: 5 },
  { price: "9.50" },
  { price: "9.00" },
];

describe("compare and below_lowest_30d, in fan-out and in replay", { timeout: 60_000 }, () => {
  it("compare: the money rules read price by default, price + shipping with total_price", async () => {
    expect(await decide({ direction: "down" }, shippingMoves)).toEqual([true, false]);
    expect(await decide({ direction: "down", compare: "price" }, shippingMoves)).toEqual([true, false]);
    expect(await decide({ direction: "down", compare: "total_price" }, shippingMoves)).toEqual([false, true]);
    // 12.00 → 13.00 → 9.50: the total crosses 12.00 downwards once, at the second change.
    expect(await decide({ currency: "USD", price_below: "12.00", compare: "total_price" }, shippingMoves)).toEqual([false, true]);
    expect(await decide({ currency: "USD", min_change_abs: "3.00", compare: "total_price" }, shippingMoves)).toEqual([false, true]);
  });

  it("compare total_price: while shipping is unknown no money rule matches; free shipping (0) is a known total", async () => {
    const unknown: Step[] = [
      { price: "10.00" },
      { price: "9.00" },
      { price: "8.00", shipping_cost: "0" },
      { price: "7.00", shipping_cost: "0" },
    ];
    expect(await decide({ direction: "down" }, unknown)).toEqual([true, true, true]);
    // 9.00 → 8.00: the total before was unknown; 8.00 → 7.00: both known (free shipping).
    expect(await decide({ direction: "down", compare: "total_price" }, unknown)).toEqual([false, false, true]);
  });

  it("below_lowest_30d: a reduction below the 30-day lowest price matches, one above it does not", async () => {
    expect(await decide({ below_lowest_30d: true }, omnibus)).toEqual([false, false, false, true, true]);
    expect(await decide({ below_lowest_30d: false }, omnibus)).toEqual([true, true, true, true, true]);
    expect(await decide({ below_lowest_30d: true, direction: "down" }, omnibus)).toEqual([false, false, false, true, true]);
  });
});

describe("compare and below_lowest_30d in the stream", { timeout: 60_000 }, () => {
  it("its hub decides as the fan-out does", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const sku = `COMPARABLE-STREAM-${Date.now()}`;
    const below = readFrames(await openStream(key, `?skus=${sku}&below_lowest_30d=true`));
    const totals = readFrames(await openStream(key, `?skus=${sku}&direction=down&compare=total_price`));
    const prices = readFrames(await openStream(key, `?skus=${sku}&direction=down`));
    try {
      for (const stream of [below, totals, prices]) await settled(() => expect(stream.frames.join("\n")).toContain(": connected"));
      const now = Date.now();
      const at = (daysAgo: number, second = 0) => new Date(now - daysAgo * 86_400_000 + second * 1000).toISOString();
      const step = async (price: string, observedAt: string, shipping?: string) =>
        (await ingest([{ sku, price, observed_at: observedAt, ...(shipping === undefined ? {} : { shipping_cost: shipping }) }])) as object;
      await step("8.00", at(45), "1.00");
      await step("12.00", at(35), "1.00"); // up
      await step("10.00", at(10), "5.00"); // price down, total up (11.00 → 15.00), above the lowest (8.00)
      await step("9.50", at(0, -2), "1.00"); // price down, total down (15.00 → 10.50), below the lowest (10.00)
      const rows = await database(env.DB)
        .select({ id: events.id })
        .from(events)
        .where(like(events.payload, `%${sku}%`))
        .orderBy(asc(events.seq));
      const [toTwelve, toTen, toNineFifty] = rows.map((row) => row.id);
      expect(toNineFifty).toBeDefined();
      await settled(() => expect(below.sentIds()).toEqual([toNineFifty]), 20);
      await settled(() => expect(totals.sentIds()).toEqual([toNineFifty]), 20);
      await settled(() => expect(prices.sentIds()).toEqual([toTen, toNineFifty]), 20);
      expect(toTwelve).toBeDefined();
    } finally {
      await Promise.all([below.close(), totals.close(), prices.close()]);
    }
  });
});
