import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type AlertSubject, matchesAlert } from "../../src/alerts/rules.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { decide as decideWith, prices, type Step } from "../helpers/alert-decide.ts";
import { call, expectJson } from "../helpers/http.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook } from "../helpers/webhooks.ts";

/**
 * Alert rules (webhook `filters`), each on both sides of its boundary, decided the same way by the
 * fan-out (right after each ingestion's commit: what reached the receiver, or was queued for it) and by
 * replay (POST /webhooks/:id/replay over the stored events). The queue's sendBatch is captured.
 */

let receiver: Receiver;
beforeAll(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.assertNoStrayRequests());
afterAll(() => vi.restoreAllMocks());

const decide = (filters: unknown, steps: Step[], body?: Record<string, unknown>) => decideWith(receiver, filters, steps, body);

// Each case ingests its steps one at a time and waits for their fan-out: seconds on a loaded machine.
describe("each rule on both sides of its boundary, in fan-out and in replay", { timeout: 30_000 }, () => {
  it("direction", async () => {
    expect(await decide({ direction: "down" }, prices("10.00", "10.50", "10.00"))).toEqual([false, true]);
    expect(await decide({ direction: "up" }, prices("10.00", "10.50", "10.00"))).toEqual([true, false]);
  });

  it("min_change_abs: at least the amount, either way", async () => {
    expect(await decide({ currency: "USD", min_change_abs: "1.00" }, prices("10.00", "11.00", "10.01", "9.01"))).toEqual([
      true,
      false,
      true,
    ]);
  });

  it("price_below is a crossing: a price hovering around the target fires once per crossing", async () => {
    // 25 → 20 (not below) → 19.99 (crossed) → 19.50 (still below) → 21 → 19 (crossed again) → 20 → 20.01
    expect(
      await decide(
        { currency: "USD", price_below: "20.00" },
        prices("25.00", "20.00", "19.99", "19.50", "21.00", "19.00", "20.00", "20.01"),
      ),
    ).toEqual([false, true, false, false, true, false, false]);
  });

  it("price_above is a crossing too", async () => {
    expect(
      await decide({ currency: "USD", price_above: "30.00" }, prices("25.00", "30.00", "30.01", "31.00", "29.00", "31.00", "30.00")),
    ).toEqual([false, true, false, false, true, false]);
  });

  it("currency: events in another currency never match an amount", async () => {
    expect(await decide({ currency: "EUR", price_below: "20.00" }, prices("25.00", "19.00"))).toEqual([false]);
    expect(
      await decide({ currency: "JPY", price_below: "2000" }, [
        { price: "2500", currency: "JPY" },
        { price: "1999", currency: "JPY" },
      ]),
    ).toEqual([true]);
    // The currency changed: the prices cannot be compared, so no price rule matches.
    expect(await decide({ direction: "down" }, [{ price: "25.00" }, { price: "19.00", currency: "EUR" }])).toEqual([false]);
  });

  it("new_low_days: below every price of the window, the price held when it opened included", async () => {
    // 9.00 sixty days ago is outside a 30-day window; 12.00 (from 45 days ago) was held when it opened.
    const history: Step[] = [
      { price: "9.00", daysAgo: 60 },
      { price: "12.00", daysAgo: 45 },
      { price: "11.00", daysAgo: 10 },
      { price: "11.50", daysAgo: 5 },
    ];
    expect(await decide({ new_low_days: 30 }, [...history, { price: "11.00", daysAgo: 1 }, { price: "10.99", daysAgo: 0 }])).toEqual([
      false, // 9.00 → 12.00
      true, // 12.00 → 11.00: below 12.00, the price held all through its window
      false,
      false, // 11.50 → 11.00: equal to the window's low is not below it
      true, // 11.00 → 10.99
    ]);
    expect((await decide({ new_low_days: 90 }, [...history, { price: "10.99", daysAgo: 0 }])).at(-1)).toBe(false); // 9.00 is inside 90 days
  });

  it("new_high_days: above every price of the window", async () => {
    const history: Step[] = [
      { price: "20.00", daysAgo: 60 },
      { price: "10.00", daysAgo: 45 },
      { price: "12.00", daysAgo: 10 },
      { price: "11.00", daysAgo: 5 },
    ];
    expect(
      (await decide({ new_high_days: 30 }, [...history, { price: "12.00", daysAgo: 1 }, { price: "12.01", daysAgo: 0 }])).slice(-2),
    ).toEqual([false, true]);
    expect((await decide({ new_high_days: 90 }, [...history, { price: "12.01", daysAgo: 0 }])).at(-1)).toBe(false); // 20.00 is inside 90 days
  });

  it("competitors, skus, brands, categories: price and stock events alike; other rules do not apply to stock", async () => {
    const other = { id: "cmp_other", name: "Other Shop" };
    const steps: Step[] = [
      { price: "10.00" },
      { price: "10.00", competitor: other },
      { price: "9.00" }, // price.changed at Amazon
      { price: "11.00", competitor: other }, // price.changed at Other
      { price: "9.00", in_stock: false }, // stock.changed at Amazon
    ];
    expect(await decide({ competitors: ["cmp_amazon"], direction: "down" }, steps)).toEqual([true, false, true]);
    expect(await decide({ competitors: ["cmp_nowhere"] }, steps)).toEqual([false, false, false]);
    expect(await decide({ brands: ["Acme"] }, steps)).toEqual([true, true, true]);
    expect(await decide({ brands: ["acme"] }, steps)).toEqual([false, false, false]); // exact match
    expect(await decide({ categories: ["Headphones", "Speakers"] }, steps)).toEqual([true, true, true]);
    expect(await decide({ categories: ["Speakers"] }, steps)).toEqual([false, false, false]);
  });

  it("min_change_pct still applies beside the rules", async () => {
    expect(await decide({ direction: "down" }, prices("10.00", "9.50", "8.00"), { min_change_pct: 10 })).toEqual([false, true]);
  });
});

describe("skus", () => {
  it("matches the listed SKUs only", async () => {
    const listed = await decide({ skus: ["NOT-THIS-ONE"] }, prices("10.00", "9.00"));
    expect(listed).toEqual([false]);
  });
});

describe("matchesAlert (the one decision)", () => {
  const subject = (oldMinor: number | null, newMinor: number | null): AlertSubject => ({
    type: "price.changed",
    currency: "USD",
    oldMinor,
    newMinor,
    oldTotalMinor: null,
    newTotalMinor: null,
    lowestMinor: null,
    competitorId: "cmp_a",
    sku: "S-1",
    brand: null,
    category: null,
  });
  const rule = (filters: object) => ({ minChangeBp: 0, filters });

  it("skus and the boundaries of the amounts, in minor units", () => {
    expect(matchesAlert(subject(1000, 900), rule({ skus: ["S-1"] }), "unchecked")).toBe(true);
    expect(matchesAlert(subject(1000, 900), rule({ skus: ["S-2"] }), "unchecked")).toBe(false);
    expect(matchesAlert(subject(2000, 1999), rule({ currency: "USD", price_below: "20" }), "unchecked")).toBe(true);
    expect(matchesAlert(subject(1999, 1998), rule({ currency: "USD", price_below: "20" }), "unchecked")).toBe(false);
    expect(matchesAlert(subject(null, null), rule({ skus: ["S-1"] }), "unchecked")).toBe(true); // a list needs no comparison
  });

  it("a history rule without its gathered window is a programming error, not a silent match", () => {
    expect(() => matchesAlert(subject(1000, 900), rule({ new_low_days: 7 }), new Map())).toThrow(/not gathered/);
    expect(matchesAlert(subject(1000, 900), rule({ new_low_days: 7 }), new Map([[7, { low: 950, high: 1200 }]]))).toBe(true);
    expect(matchesAlert(subject(1000, 900), rule({ new_low_days: 7 }), new Map([[7, { low: 900, high: 1200 }]]))).toBe(false);
  });
});

describe("filters on POST and PATCH /webhooks", () => {
  it("are stored, shown, replaced and cleared", async () => {
    const token = (await freshAccount()).token;
    const filters = {
      direction: "down",
      currency: "EUR",
      price_below: "19.99",
      new_low_days: 30,
      competitors: ["cmp_a"],
      brands: ["Ünïcode ✓"],
    };
    const hook = await createWebhook(token, { url: hookUrl(), filters });
    expect(hook).toMatchObject({ filters });
    expect(await expectJson(await call("GET", `/webhooks/${hook.id}`, { token }), 200)).toMatchObject({ filters });
    const patched = await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { filters: { skus: ["A"] } } }), 200);
    expect(patched.filters).toEqual({ skus: ["A"] });
    expect((await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { filters: null } }), 200)).filters).toBeNull();
    expect((await createWebhook(token, { url: hookUrl() })).filters).toBeNull();
  });

  it.each([
    [{ price_below: "20.00" }, "filters.currency: is required with price_below"],
    [{ currency: "JPY", min_change_abs: "1.5" }, "filters.min_change_abs: must be a whole number"],
    [{ currency: "USD", price_above: 30 }, "filters.price_above: must be a decimal string"],
    [{ currency: "usd" }, "filters.currency:"],
    [{ direction: "sideways" }, "filters.direction: must be up or down"],
    [{ new_low_days: 0 }, "filters.new_low_days: must be from 1 to 365"],
    [{ new_high_days: 366 }, "filters.new_high_days: must be from 1 to 365"],
    [{ new_high_days: 1.5 }, "filters.new_high_days: must be a whole number"],
    [{ competitors: [] }, "filters.competitors: must hold at least one value"],
    [{ skus: Array.from({ length: 1001 }, (_, i) => `S${i}`) }, "filters.skus: must hold at most 1,000 values"],
    [{ brands: [""] }, "filters.brands.0: must not be empty"],
    [{ colour: "red" }, "filters: Unrecognized key"],
    ["down", "filters: must be a JSON object or null"],
  ])("%j → 400 naming the field", async (filters, detail) => {
    const token = (await freshAccount()).token;
    const res = await call("POST", "/webhooks", { token, body: { url: hookUrl(), filters } });
    const body = await expectJson(res, 400);
    expect(body.detail).toContain(detail);
    expect(await expectJson(await call("GET", "/webhooks", { token }), 200)).toEqual({ webhooks: [] }); // nothing stored
  });

  it("1,000 entries a list are accepted (short ones: the rules are at most 16 KiB as JSON)", async () => {
    const token = (await freshAccount()).token;
    const skus = Array.from({ length: 1000 }, (_, i) => `SKU-${i}`);
    expect((await createWebhook(token, { url: hookUrl(), filters: { skus } })).filters).toEqual({ skus });
  });
});
