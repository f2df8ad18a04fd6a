import { env } from "cloudflare:workers";
import { count, eq, like } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { archiveHistory } from "../../src/catalogue/history-archive.ts";
import { database } from "../../src/platform/db.ts";
import { events, offers, priceHistory, products } from "../../src/platform/tables.ts";
import { DAY_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { buildSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";
import { ingest, type ObservationInput, observation, postObservations } from "../helpers/webhooks.ts";

/**
 * The offer's derived figures (the contract's "Comparable prices"), each against a value computed by hand: total_price,
 * unit_price in every unit, seller and condition, check_status (a failed check changes nothing else and emits
 * nothing), and lowest_price_30d, also once the history it was built from has moved to R2.
 */

const db = () => database(env.DB);
let key: string;
beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
});
afterEach(() => vi.restoreAllMocks());

type Offer = Schemas["Offer"];
const productId = async (sku: string) => (await db().select({ id: products.id }).from(products).where(eq(products.sku, sku)).get())!.id;
/** The product as GET /products/:id serves it, once the snapshot holds what was ingested. */
const product = async (sku: string) => {
  await buildSnapshot();
  return expectJson(await call("GET", `/products/${await productId(sku)}`, { token: key }), 200) as Promise<Schemas["Product"]>;
};
const offerOf = async (sku: string): Promise<Offer> => (await product(sku)).offers[0]!;
const eventsOf = async (sku: string) =>
  (await db()
    .select({ n: count() })
    .from(events)
    .where(like(events.payload, `%"sku":"${sku}"%`))
    .get())!.n;
const historyRows = async (sku: string) =>
  (await db()
    .select({ n: count() })
    .from(priceHistory)
    .where(eq(priceHistory.productId, await productId(sku)))
    .get())!.n;
const daysAgo = (days: number) => new Date(Date.now() - days * DAY_MS).toISOString();
const cents = (minor: number) => (minor / 100).toFixed(2);

describe("total_price", () => {
  it("is price + shipping_cost; null while shipping is unknown; free shipping (0) makes it the price", async () => {
    await ingest([
      { sku: "TOTAL-UNKNOWN", price: "19.99" },
      { sku: "TOTAL-FREE", price: "19.99", shipping_cost: "0" },
      { sku: "TOTAL-PAID", price: "19.99", shipping_cost: "4.95" },
      { sku: "TOTAL-JPY", price: "1980", currency: "JPY", shipping_cost: "550" },
      { sku: "TOTAL-KWD", price: "12.125", currency: "KWD", shipping_cost: "1.500" },
    ]);
    expect(await offerOf("TOTAL-UNKNOWN")).toMatchObject({ shipping_cost: null, total_price: null });
    expect(await offerOf("TOTAL-FREE")).toMatchObject({ shipping_cost: "0.00", total_price: "19.99" });
    expect(await offerOf("TOTAL-PAID")).toMatchObject({ shipping_cost: "4.95", total_price: "24.94" });
    expect(await offerOf("TOTAL-JPY")).toMatchObject({ total_price: "2530" });
    expect(await offerOf("TOTAL-KWD")).toMatchObject({ total_price: "13.625" });
  });
});

describe("unit_price", () => {
  // [quantity, unit, price, currency] → [amount, per], each worked out by hand (half-even at the minor unit).
  const cases: [string, string, string, string, string, string][] = [
    ["500", "g", "2.99", "EUR", "5.98", "1 kg"], // 2.99 ÷ 0.5 kg
    ["2.5", "kg", "12.50", "EUR", "5.00", "1 kg"],
    ["750", "ml", "1.99", "EUR", "2.65", "1 l"], // 2.6533… → 2.65
    ["1.5", "l", "3.00", "EUR", "2.00", "1 l"],
    ["30", "cm", "4.50", "EUR", "15.00", "1 m"], // 4.50 ÷ 0.3 m
    ["2.5", "m", "9.99", "EUR", "4.00", "1 m"], // 3.996 → 4.00
    ["1.2", "m2", "29.90", "EUR", "24.92", "1 m2"], // 24.9166… → 24.92
    ["3", "count", "5.00", "EUR", "1.67", "1 count"], // 1.666… → 1.67
    ["2", "count", "0.25", "EUR", "0.12", "1 count"], // 0.125: a tie, to the even 0.12
    ["2", "count", "0.35", "EUR", "0.18", "1 count"], // 0.175: a tie, to the even 0.18
    ["300", "g", "1000", "JPY", "3333", "1 kg"], // 3,333.3… yen
    ["0.25", "l", "1.000", "KWD", "4.000", "1 l"],
  ];

  it("is price ÷ quantity in kg, l, m, m2 or pieces (g → kg, ml → l, cm → m), rounded half-even", async () => {
    await ingest(cases.map(([quantity, unit, price, currency], i) => ({ sku: `UNIT-${i}-${unit}`, quantity, unit, price, currency })));
    for (const [i, [quantity, unit, , , amount, per]] of cases.entries())
      expect((await offerOf(`UNIT-${i}-${unit}`)).unit_price, `${quantity} ${unit}`).toEqual({ amount, per });
  });

  it("is null without a quantity; quantity and unit come together, and a quantity is positive", async () => {
    await ingest([{ sku: "UNIT-NONE", price: "1.00" }]);
    expect((await offerOf("UNIT-NONE")).unit_price).toBeNull();
    const refused = async (fields: Partial<ObservationInput>) =>
      (await expectJson(await postObservations([observation({ sku: "UNIT-BAD", ...fields })]), 400)).detail;
    expect(await refused({ quantity: "500" })).toBe("Invalid body: observations.0.unit: is required with quantity (both or neither)");
    expect(await refused({ unit: "g" })).toBe("Invalid body: observations.0.quantity: is required with unit (both or neither)");
    expect(await refused({ quantity: "0", unit: "g" })).toContain("observations.0.quantity: must be a positive decimal string");
    expect(await refused({ quantity: "500", unit: "lb" })).toContain("observations.0.unit: must be one of g, kg, ml, l, cm, m, m2, count");
  });
});

describe("seller and condition", () => {
  it("are kept with the offer: condition new unless told; a change of either changes the product's updated_at, not its history", async () => {
    await ingest([{ sku: "SELLER-1", price: "50.00", observed_at: daysAgo(0.02) }]);
    expect(await offerOf("SELLER-1")).toMatchObject({ seller: null, condition: "new" });
    const before = await product("SELLER-1");
    await ingest([{ sku: "SELLER-1", price: "50.00", seller: "Gadget Outlet GmbH", condition: "refurbished", observed_at: daysAgo(0.01) }]);
    const after = await product("SELLER-1");
    expect(after.offers[0]).toMatchObject({ seller: "Gadget Outlet GmbH", condition: "refurbished" });
    expect(after.updated_at > before.updated_at).toBe(true);
    expect(await historyRows("SELLER-1")).toBe(1);
    expect(await eventsOf("SELLER-1")).toBe(0);
  });
});

describe("check_status", () => {
  it("a failed check keeps price, stock and history, emits nothing; an ok check after it sets it back without a false change", async () => {
    const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch");
    const sku = "CHECK-1";
    const [t1, t2, t3] = [daysAgo(0.03), daysAgo(0.02), daysAgo(0.01)];
    await ingest([{ sku, price: "10.00", shipping_cost: "1.00", observed_at: t1 }]);
    const failed = { sku, name: `Product ${sku}`, competitor: { id: "cmp_amazon", name: "Amazon" }, check_status: "not_found" };
    expect(await expectJson(await postObservations([{ ...failed, observed_at: t2 }]), 200)).toEqual({
      received: 1,
      products_created: 0,
      offers_created: 0,
      price_changes: 0,
      stock_changes: 0,
    });
    expect(await offerOf(sku)).toMatchObject({
      price: "10.00",
      in_stock: true,
      total_price: "11.00",
      check_status: "not_found",
      checked_at: t2,
    });
    expect(await historyRows(sku)).toBe(1);
    // The same price and stock as before the failure: no price.changed, no stock.changed, no history row.
    expect(await ingest([{ sku, price: "10.00", shipping_cost: "1.00", observed_at: t3 }])).toMatchObject({
      price_changes: 0,
      stock_changes: 0,
    });
    expect(await offerOf(sku)).toMatchObject({ check_status: "ok", checked_at: t3 });
    expect(await historyRows(sku)).toBe(1);
    expect(await eventsOf(sku)).toBe(0);
    expect(sent).not.toHaveBeenCalled();
    // A stale failed check (older than the last check) changes nothing.
    await expectJson(await postObservations([{ ...failed, check_status: "blocked", observed_at: t1 }]), 200);
    expect(await offerOf(sku)).toMatchObject({ check_status: "ok", checked_at: t3 });
  });

  it("a failed check carries no price, currency, in_stock or shipping_cost, and must name a known offer", async () => {
    const failed = { sku: "CHECK-1", name: "Product CHECK-1", competitor: { id: "cmp_amazon", name: "Amazon" }, check_status: "blocked" };
    const detail = async (body: object) => (await expectJson(await postObservations([body]), 400)).detail;
    expect(await detail({ ...failed, price: "9.00" })).toBe(
      "Invalid body: observations.0: price: must be left out when check_status is not ok (a failed check carries no price, " +
        "currency, in_stock, shipping_cost or other offer terms: only the product, competitor, url and observed_at)",
    );
    for (const field of ["currency", "in_stock", "shipping_cost"])
      expect(await detail({ ...failed, [field]: field === "in_stock" ? false : "USD" })).toContain(`${field}: must be left out`);
    expect(await detail({ ...failed, check_status: "gone" })).toBe(
      "Invalid body: observations.0.check_status: must be ok, not_found or blocked",
    );
    expect(await detail({ ...failed, sku: "CHECK-UNKNOWN" })).toBe(
      'Invalid body: observations.0.check_status: "CHECK-UNKNOWN" has no offer from "cmp_amazon" yet, so a failed check has ' +
        "nothing to update; send its first observation with a price (check_status ok)",
    );
    // An ok observation still needs its price.
    const { price: _, ...priceless } = observation({ sku: "CHECK-1" });
    expect(await detail(priceless)).toContain("Invalid body: observations.0.price: must be a decimal string");
  });
});

describe("lowest_price_30d", () => {
  it("is the lowest price of the 30 days before the current one took effect; null for a first price", async () => {
    const sku = "LOW-1";
    await ingest([{ sku, price: "10.00", observed_at: daysAgo(40) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBeNull();
    await ingest([{ sku, price: "12.00", observed_at: daysAgo(35) }]); // 10.00 held until now: lowest 10.00
    expect((await offerOf(sku)).lowest_price_30d).toBe("10.00");
    await ingest([{ sku, price: "11.00", observed_at: daysAgo(0.01) }]); // 10.00 ended 35 days ago: outside; 12.00 inside
    expect((await offerOf(sku)).lowest_price_30d).toBe("12.00");
    // Stock alone does not move it, nor does the same price again.
    await ingest([{ sku, price: "11.00", in_stock: false, observed_at: daysAgo(0.005) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBe("12.00");
  });

  it("stays right when the history it came from has moved to R2, and the event carries it", async () => {
    const sku = "LOW-ARCHIVE";
    await ingest([{ sku, price: "10.00", observed_at: daysAgo(25) }]);
    await ingest([{ sku, price: "12.00", observed_at: daysAgo(12) }]);
    await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    expect(await historyRows(sku)).toBe(0); // both rows are in R2 now
    const history = await expectJson(await call("GET", `/products/${await productId(sku)}/history`, { token: key }), 200);
    expect(history.history.map((row) => row.price)).toEqual(["10.00", "12.00"]);
    // 10.00 (held until 12 days ago) and 12.00 are both inside the 30 days: a reduction to 11.00 is above the lowest.
    await ingest([{ sku, price: "11.00", observed_at: daysAgo(0.02) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBe("10.00");
    // A reduction to 9.00: the window's prices are 10.00, 12.00 and 11.00; 9.00 is below the lowest.
    await ingest([{ sku, price: "9.00", observed_at: daysAgo(0.01) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBe("10.00");
    const payloads = await db()
      .select({ payload: events.payload })
      .from(events)
      .where(like(events.payload, `%"sku":"${sku}"%`));
    const data = payloads.map((row) => (JSON.parse(row.payload) as { data: Record<string, unknown> }).data);
    expect(data.map((d) => [d.old_price, d.new_price, d.lowest_price_30d])).toEqual([
      ["10.00", "12.00", "10.00"],
      ["12.00", "11.00", "10.00"],
      ["11.00", "9.00", "10.00"],
    ]);
  });

  it("keeps the true low through any number of rises within 30 days (65 rises, then a reduction)", async () => {
    const sku = "LOW-RISES";
    await ingest([{ sku, price: "10.00", observed_at: daysAgo(20) }]);
    // 65 rises of a cent, one an hour: each dearer than every price before, so each may be a later window's lowest.
    const rises = Array.from({ length: 65 }, (_, i) => ({ sku, price: cents(1001 + i), observed_at: daysAgo(19 - i / 24) }));
    await ingest(rises);
    expect(await offerOf(sku)).toMatchObject({ price: "10.65", lowest_price_30d: "10.00" });
    await ingest([{ sku, price: "9.50", observed_at: daysAgo(1) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBe("10.00");
    // What the row keeps: 10.00 and every rise (10.01 … 10.65), none forgotten.
    const row = await db()
      .select({ prior: offers.priorPrices })
      .from(offers)
      .where(eq(offers.productId, await productId(sku)))
      .get();
    expect(row!.prior.map(([, minor]) => minor)).toEqual(Array.from({ length: 66 }, (_, i) => 1000 + i));
  });

  it("as the window slides past the low, the lowest is the first rise still inside it, exactly", async () => {
    const sku = "LOW-SLIDE";
    await ingest([{ sku, price: "10.00", observed_at: daysAgo(45) }]);
    // 70 rises, 6 hours apart: price 10.01 + i cents from 44.1 − i/4 days ago, so 10.57 (i = 56) is the first price
    // to end inside the 30 days before now (29.85 days ago; 10.56 ended 30.1 days ago).
    const rises = Array.from({ length: 70 }, (_, i) => ({ sku, price: cents(1001 + i), observed_at: daysAgo(44.1 - i / 4) }));
    await ingest(rises);
    await ingest([{ sku, price: "10.50", observed_at: daysAgo(0) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBe("10.57");
  });

  it("starts afresh when the currency changes: prices in two currencies are not compared", async () => {
    const sku = "LOW-CURRENCY";
    await ingest([{ sku, price: "10.00", observed_at: daysAgo(3) }]);
    await ingest([{ sku, price: "9.50", currency: "EUR", observed_at: daysAgo(2) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBeNull();
    await ingest([{ sku, price: "9.00", currency: "EUR", observed_at: daysAgo(1) }]);
    expect((await offerOf(sku)).lowest_price_30d).toBe("9.50");
  });
});
