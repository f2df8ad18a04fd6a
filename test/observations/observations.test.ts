import { env } from "cloudflare:workers";
import { asc, count, eq } from "drizzle-orm";
import { afterEach, beforeAll, beforeEach, describe, expect, it, type MockInstance, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import type { EventMessage, WebhookMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { catalogueState, competitors, offers, priceHistory, products } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { buildSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson, workCounts } from "../helpers/http.ts";
import { ingest, observation, postObservations } from "../helpers/webhooks.ts";

const db = () => database(env.DB);
let key: string;
let sent: MockInstance<Queue<WebhookMessage>["sendBatch"]>;

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
});
beforeEach(() => {
  // Events still reach the real queue (this file has no webhooks, so the consumer fans out to none).
  sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch");
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The event messages sent to WEBHOOK_QUEUE since the test began. */
const sentEvents = () => sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => m.body as EventMessage));

/** The product as GET /products/:id serves it, once the snapshot holds what was ingested. */
const product = async (sku: string) => {
  await buildSnapshot();
  const row = await db().select().from(products).where(eq(products.sku, sku)).get();
  const body = await expectJson(await call("GET", `/products/${row!.id}`, { token: key }), 200);
  return body;
};
const historyOf = async (sku: string) => {
  const row = await db().select().from(products).where(eq(products.sku, sku)).get();
  return db().select().from(priceHistory).where(eq(priceHistory.productId, row!.id)).orderBy(asc(priceHistory.id)).all();
};
const version = async () => (await db().select().from(catalogueState).get())?.version ?? 0;
const counts = async () => {
  const [p, o, h, c] = await db().batch([
    db().select({ n: count() }).from(products),
    db().select({ n: count() }).from(offers),
    db().select({ n: count() }).from(priceHistory),
    db().select({ n: count() }).from(competitors),
  ]);
  return { products: p[0]!.n, offers: o[0]!.n, history: h[0]!.n, competitors: c[0]!.n };
};

const T1 = "2026-03-01T10:00:00.000Z";
const T2 = "2026-03-01T11:00:00.000Z";
const T3 = "2026-03-01T12:00:00.000Z";
const walmart = { id: "cmp_walmart", name: "Walmart", domain: "walmart.com" };

describe("POST /admin/observations: new observations", () => {
  it("create products, offers and competitors, a history row each, and no events", async () => {
    const before = await counts();
    const result = await ingest([
      { sku: "NEW-A", observed_at: T1, price: "14.99" },
      { sku: "NEW-A", observed_at: T1, competitor: walmart, price: "15.49", in_stock: false },
      { sku: "NEW-B", observed_at: T1, competitor: { id: "cmp_rakuten", name: "Rakuten" }, price: "1500", currency: "JPY" },
      {
        sku: "NEW-C",
        observed_at: T1,
        competitor: { id: "cmp_gulf", name: "Gulf" },
        price: "1.250",
        currency: "BHD",
        shipping_cost: "0.500",
      },
    ]);
    expect(result).toEqual({ received: 4, products_created: 3, offers_created: 4, price_changes: 0, stock_changes: 0 });
    const after = await counts();
    expect(after.products - before.products).toBe(3);
    expect(after.offers - before.offers).toBe(4);
    expect(after.history - before.history).toBe(4);
    expect(after.competitors - before.competitors).toBe(4);
    expect(sentEvents()).toEqual([]);

    const a = await product("NEW-A");
    expect(a.offers.map((o) => [o.competitor_id, o.price, o.currency, o.in_stock, o.checked_at, o.previous_price])).toEqual([
      ["cmp_amazon", "14.99", "USD", true, T1, null],
      ["cmp_walmart", "15.49", "USD", false, T1, null],
    ]);
    expect(a.name).toBe("Product NEW-A");
    expect(a.last_changed_at).toBeNull();
    expect((await product("NEW-B")).offers[0]).toMatchObject({ price: "1500", currency: "JPY" });
    expect((await product("NEW-C")).offers[0]).toMatchObject({ price: "1.250", currency: "BHD", shipping_cost: "0.500" });
    // Exact integers in D1, never floats.
    const [bhd] = await db().select().from(offers).where(eq(offers.competitorId, "cmp_gulf"));
    expect(bhd).toMatchObject({ priceMinor: 1250, shippingMinor: 500 });
  });

  it("moves the catalogue version and marks the product in the same write, so the next snapshot has a new ETag", async () => {
    const first = await call("GET", "/products", { token: key });
    const etag = first.headers.get("ETag")!;
    await ingest([{ sku: "ETAG-1", observed_at: T1 }]);
    expect(await db().select({ changed: products.changedVersion }).from(products).where(eq(products.sku, "ETAG-1")).get()).toEqual({
      changed: await version(),
    });
    await buildSnapshot(); // what the builder's alarm does after the ingestion's poke
    const second = await call("GET", "/products", { token: key, headers: { "If-None-Match": etag } });
    expect(second.status).toBe(200);
    expect(second.headers.get("ETag")).not.toBe(etag);
    expect(((await second.json()) as Schemas["ProductList"]).products.some((p) => p.sku === "ETAG-1")).toBe(true);
  });

  it("costs one D1 batch to read and one to write, whatever the number of observations (1,000 here)", async () => {
    const observations = Array.from({ length: 1000 }, (_, i) => observation({ sku: `BULK-${i}`, price: `${i}.99`, observed_at: T1 }));
    const res = await postObservations(observations);
    expect(await expectJson(res, 200)).toEqual({
      received: 1000,
      products_created: 1000,
      offers_created: 1000,
      price_changes: 0,
      stock_changes: 0,
    });
    expect(workCounts(res).d1).toBe(2);
    expect((await product("BULK-999")).offers[0]!.price).toBe("999.99");
  });
});

describe("changes", () => {
  it("a new price: one history row, previous_price, and one price.changed event with exact money", async () => {
    await ingest([{ sku: "CHG-PRICE", observed_at: T1, price: "10.00" }]);
    sent.mockClear();
    const result = await ingest([{ sku: "CHG-PRICE", observed_at: T2, price: "9.99", url: "https://www.amazon.com/dp/X" }]);
    expect(result).toEqual({ received: 1, products_created: 0, offers_created: 0, price_changes: 1, stock_changes: 0 });

    const view = await product("CHG-PRICE");
    expect(view.offers[0]).toMatchObject({ price: "9.99", previous_price: "10.00", price_changed_at: T2, checked_at: T2 });
    expect(view.last_changed_at).toBe(T2);
    expect((await historyOf("CHG-PRICE")).map((h) => [h.priceMinor, h.observedAt])).toEqual([
      [1000, T1],
      [999, T2],
    ]);

    const [message, ...rest] = sentEvents();
    expect(rest).toEqual([]);
    expect(message!.kind).toBe("event");
    expect(message!.price_change).toEqual({ old_minor: 1000, new_minor: 999 });
    const { event } = message!;
    expect(event.id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(event.type).toBe("price.changed");
    expect(event.data).toEqual({
      event_id: event.id,
      product_id: view.id,
      sku: "CHG-PRICE",
      name: "Product CHG-PRICE",
      competitor_id: "cmp_amazon",
      competitor_name: "Amazon",
      url: "https://www.amazon.com/dp/X",
      currency: "USD",
      old_price: "10.00",
      new_price: "9.99",
      change_abs: "-0.01",
      change_pct: -0.1,
      direction: "down",
      old_total_price: null, // shipping unknown
      new_total_price: null,
      lowest_price_30d: "10.00", // the price held up to the change
      observed_at: T2,
    });
  });

  it("stock only: a history row and one stock.changed event", async () => {
    await ingest([{ sku: "CHG-STOCK", observed_at: T1, price: "5.00" }]);
    sent.mockClear();
    expect(await ingest([{ sku: "CHG-STOCK", observed_at: T2, price: "5.00", in_stock: false }])).toEqual({
      received: 1,
      products_created: 0,
      offers_created: 0,
      price_changes: 0,
      stock_changes: 1,
    });
    const events = sentEvents();
    expect(events.map((m) => m.event.type)).toEqual(["stock.changed"]);
    expect(events[0]!.event.data).toMatchObject({
      sku: "CHG-STOCK",
      price: "5.00",
      currency: "USD",
      in_stock_before: true,
      in_stock: false,
      observed_at: T2,
    });
    expect((await historyOf("CHG-STOCK")).map((h) => h.inStock)).toEqual([true, false]);
    expect((await product("CHG-STOCK")).offers[0]!.previous_price).toBeNull();
  });

  it("price and stock together: one history row, two events", async () => {
    await ingest([{ sku: "CHG-BOTH", observed_at: T1, price: "20.00", in_stock: false }]);
    sent.mockClear();
    expect(await ingest([{ sku: "CHG-BOTH", observed_at: T2, price: "25.00", in_stock: true }])).toMatchObject({
      price_changes: 1,
      stock_changes: 1,
    });
    expect(sentEvents().map((m) => [m.event.type, m.event.data.direction ?? m.event.data.in_stock])).toEqual([
      ["price.changed", "up"],
      ["stock.changed", true],
    ]);
    expect(sentEvents()[0]!.event.data).toMatchObject({ change_abs: "5.00", change_pct: 25 });
    expect(await historyOf("CHG-BOTH")).toHaveLength(2);
  });

  it("a new currency is a price change that cannot be measured: old_price and the changes are null", async () => {
    await ingest([{ sku: "CHG-CUR", observed_at: T1, price: "10.00" }]);
    sent.mockClear();
    expect(await ingest([{ sku: "CHG-CUR", observed_at: T2, price: "9.00", currency: "EUR" }])).toMatchObject({ price_changes: 1 });
    const [message] = sentEvents();
    expect(message!.price_change).toBeNull();
    expect(message!.event.data).toMatchObject({
      currency: "EUR",
      old_price: null,
      new_price: "9.00",
      change_abs: null,
      change_pct: null,
      direction: null,
    });
    expect((await product("CHG-CUR")).offers[0]).toMatchObject({ price: "9.00", currency: "EUR", previous_price: null });
  });

  it("several observations of one offer in one call apply oldest first, each against the one before", async () => {
    const result = await ingest([
      { sku: "CHG-SEQ", observed_at: T3, price: "12.00" },
      { sku: "CHG-SEQ", observed_at: T1, price: "10.00" },
      { sku: "CHG-SEQ", observed_at: T2, price: "11.00" },
    ]);
    expect(result).toEqual({ received: 3, products_created: 1, offers_created: 1, price_changes: 2, stock_changes: 0 });
    expect(sentEvents().map((m) => [m.event.data.old_price, m.event.data.new_price])).toEqual([
      ["10.00", "11.00"],
      ["11.00", "12.00"],
    ]);
    expect((await historyOf("CHG-SEQ")).map((h) => h.priceMinor)).toEqual([1000, 1100, 1200]);
  });
});

describe("unchanged, replayed and stale observations", () => {
  it("the same price and stock later: no history, no event; only checked_at moves", async () => {
    await ingest([{ sku: "SAME", observed_at: T1 }]);
    sent.mockClear();
    expect(await ingest([{ sku: "SAME", observed_at: T2 }])).toEqual({
      received: 1,
      products_created: 0,
      offers_created: 0,
      price_changes: 0,
      stock_changes: 0,
    });
    expect(sentEvents()).toEqual([]);
    expect(await historyOf("SAME")).toHaveLength(1);
    expect((await product("SAME")).offers[0]!.checked_at).toBe(T2);
  });

  it("a replay (the same observed_at) changes nothing at all: no row, no event, no new catalogue version", async () => {
    const batch = [
      { sku: "REPLAY", observed_at: T1, price: "10.00" },
      { sku: "REPLAY", observed_at: T2, price: "8.00", in_stock: false },
    ];
    expect(await ingest(batch)).toMatchObject({ price_changes: 1, stock_changes: 1 });
    sent.mockClear();
    const [before, versionBefore] = [await counts(), await version()];
    const etag = (await call("GET", "/products", { token: key })).headers.get("ETag");
    expect(await ingest(batch)).toEqual({ received: 2, products_created: 0, offers_created: 0, price_changes: 0, stock_changes: 0 });
    expect(await ingest(batch.slice(1))).toEqual({
      received: 1,
      products_created: 0,
      offers_created: 0,
      price_changes: 0,
      stock_changes: 0,
    });
    expect(await counts()).toEqual(before);
    expect(await version()).toBe(versionBefore);
    expect(sentEvents()).toEqual([]);
    expect((await call("GET", "/products", { token: key, headers: { "If-None-Match": etag! } })).status).toBe(304);
  });

  it("an observation older than the offer's checked_at does not overwrite it", async () => {
    await ingest([{ sku: "STALE", observed_at: T2, price: "10.00" }]);
    sent.mockClear();
    expect(await ingest([{ sku: "STALE", observed_at: T1, price: "99.00", in_stock: false }])).toMatchObject({
      price_changes: 0,
      stock_changes: 0,
    });
    expect((await product("STALE")).offers[0]).toMatchObject({ price: "10.00", in_stock: true, checked_at: T2 });
    expect(sentEvents()).toEqual([]);
  });

  it("without observed_at the request time is used, so a re-sent observation is unchanged, not new", async () => {
    await ingest([{ sku: "NOW", price: "3.00" }]);
    sent.mockClear();
    expect(await ingest([{ sku: "NOW", price: "3.00" }])).toMatchObject({ offers_created: 0, price_changes: 0, stock_changes: 0 });
    expect(sentEvents()).toEqual([]);
  });
});

describe("products and competitors", () => {
  it("product details: the first observation sets them, later ones only fill in what is missing", async () => {
    await ingest([{ sku: "DETAILS", name: "First name", brand: "Acme", observed_at: T1 }]);
    await ingest([
      { sku: "DETAILS", name: "Other shop's name", brand: "ACME Corp", category: "Tools", gtin: "0012345678905", observed_at: T2 },
    ]);
    expect(await product("DETAILS")).toMatchObject({ name: "First name", brand: "Acme", category: "Tools", gtin: "0012345678905" });
  });

  it("a stored competitor is never renamed by an observation: nothing about it changes and no other product is marked", async () => {
    const id = `cmp_${crypto.randomUUID().slice(0, 8)}`;
    const [mine, other] = [`CMP-${crypto.randomUUID()}`, `CMP-${crypto.randomUUID()}`];
    const stored = { id, name: "Old Name", domain: "old.example" };
    await ingest([
      { sku: mine, competitor: stored, observed_at: T1, price: "10.00" },
      { sku: other, competitor: stored, observed_at: T1 },
    ]);
    const mark = async (sku: string) =>
      (await db().select({ v: products.changedVersion }).from(products).where(eq(products.sku, sku)).get())!.v;
    const [versionBefore, otherMark] = [await version(), await mark(other)];
    sent.mockClear();

    // Another spelling in a replay: nothing at all is written.
    const renamed = { id, name: "New Name", domain: "new.example" };
    expect(await ingest([{ sku: mine, competitor: renamed, observed_at: T1, price: "10.00" }])).toMatchObject({ price_changes: 0 });
    expect(await version()).toBe(versionBefore);

    // In a change: the change is written, under the stored name; the other product is not marked.
    await ingest([{ sku: mine, competitor: renamed, observed_at: T2, price: "9.00" }]);
    expect(await db().select().from(competitors).where(eq(competitors.id, id)).get()).toEqual(stored);
    expect(await version()).toBe(versionBefore + 1);
    expect(await mark(other)).toBe(otherMark);
    expect(await mark(mine)).toBe(versionBefore + 1);
    expect(sentEvents().map((m) => m.event.data.competitor_name)).toEqual(["Old Name"]);
    expect((await product(mine)).offers[0]!.competitor_name).toBe("Old Name");
  });
});

describe("concurrent ingestions of the same offer", () => {
  it("never compute two events against the same old state: the later write is re-read and re-applied", async () => {
    await ingest([{ sku: "RACE", observed_at: T1, price: "10.00" }]);
    sent.mockClear();
    const at = (minute: number) => `2026-03-01T10:${String(minute).padStart(2, "0")}:00.000Z`;
    const responses = await Promise.all(
      [11, 12, 13, 14, 15].map((minute) =>
        postObservations([observation({ sku: "RACE", observed_at: at(minute), price: `${minute}.00` })]),
      ),
    );
    const results = await Promise.all(responses.map((res) => expectJson(res, 200)));
    const changes = results.reduce((sum, r) => sum + r.price_changes, 0);

    const observedAt = (m: EventMessage) => String(m.event.data.observed_at);
    const events = sentEvents()
      .filter((m) => m.event.data.sku === "RACE")
      .sort((a, b) => observedAt(a).localeCompare(observedAt(b)));
    const history = await historyOf("RACE");
    // Each event continues from the one before, and matches a history row: no two saw the same old price.
    expect(events).toHaveLength(changes);
    expect(history).toHaveLength(changes + 1);
    expect(new Set(events.map((m) => m.event.data.old_price)).size).toBe(events.length);
    for (const [i, m] of events.entries()) expect(m.event.data.old_price).toBe(i === 0 ? "10.00" : events[i - 1]!.event.data.new_price);
    expect((await product("RACE")).offers[0]).toMatchObject({ price: "15.00", checked_at: at(15) });
  });
});
