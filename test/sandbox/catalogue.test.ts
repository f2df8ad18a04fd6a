import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { SANDBOX_SHOPS } from "../../src/sandbox/world.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { buildSnapshot } from "../helpers/catalogue-factory.ts";
import { oneGzipMember, rawGet } from "../helpers/gzip-member.ts";
import { call, expectJson } from "../helpers/http.ts";
import { adminToken } from "../helpers/tokens.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * The sandbox (contract, "Test mode"): a test key reads a synthetic catalogue of 1,000 products, the same for every
 * account, plus its own account's changes; it never sees live data, and a live key never sees sandbox data.
 */

interface Product {
  id: string;
  sku: string;
  offers: { competitor_id: string; price: string; currency: string; in_stock: boolean }[];
}

async function testAccount() {
  const account = await freshAccount();
  const created = await expectJson(
    await call("POST", "/api-keys", { token: account.token, body: { name: "sandbox", environment: "test" } }),
    201,
  );
  return { ...account, testKey: created.key as string };
}

const products = async (key: string, query = ""): Promise<Product[]> =>
  ((await expectJson(await call("GET", `/products${query}`, { token: key }), 200)) as unknown as { products: Product[] }).products;

const change = (product: Product, price: string, competitor = product.offers[0]!) => ({
  sku: product.sku,
  name: "ignored: a stored product keeps its name",
  competitor: { id: competitor.competitor_id, name: "ignored" },
  price,
  currency: competitor.currency,
  in_stock: competitor.in_stock,
});

const simulateObservations = (key: string, observations: unknown[]) =>
  call("POST", "/test/observations", { token: key, body: { observations } });

describe("a test key reads the sandbox", () => {
  it("1,000 synthetic products, TEST- SKUs, the sandbox's own shops in several currencies, the same for every account", async () => {
    const [a, b] = [await testAccount(), await testAccount()];
    const listed = await products(a.testKey);
    expect(listed).toHaveLength(1000);
    expect(listed.every((p) => p.sku.startsWith("TEST-"))).toBe(true);
    expect(new Set(listed.map((p) => p.sku)).size).toBe(1000);
    const shops = new Set(listed.flatMap((p) => p.offers.map((o) => o.competitor_id)));
    expect([...shops].sort()).toEqual(SANDBOX_SHOPS.map((s) => s.id).sort());
    expect(new Set(listed.flatMap((p) => p.offers.map((o) => o.currency)))).toEqual(new Set(["USD", "GBP", "EUR", "JPY"]));
    expect(listed.every((p) => p.offers.length >= 2)).toBe(true);
    expect(await products(b.testKey)).toEqual(listed);
    const { competitors } = await expectJson(await call("GET", "/competitors", { token: a.testKey }), 200);
    expect(competitors.map((c) => c.id).sort()).toEqual(SANDBOX_SHOPS.map((s) => s.id).sort());
    expect(competitors.reduce((sum, c) => sum + c.offer_count, 0)).toBe(listed.reduce((sum, p) => sum + p.offers.length, 0));
  });

  it("history over the last 30 days, ending now, as GET /products/{id}/history gives it", async () => {
    const { testKey } = await testAccount();
    const [first] = await products(testKey, "?sku=TEST-CF-0001");
    const { history } = await expectJson(await call("GET", `/products/${first!.id}/history`, { token: testKey }), 200);
    const times = history.map((row) => Date.parse(row.observed_at));
    expect(Math.min(...times)).toBeGreaterThan(Date.now() - 31 * 86_400_000);
    expect(Math.max(...times)).toBeLessThanOrEqual(Date.now());
    expect(new Set(history.map((row) => row.competitor_id))).toEqual(new Set(first!.offers.map((o) => o.competitor_id)));
    // Each offer's current price is its latest history row's.
    for (const offer of first!.offers)
      expect(history.filter((row) => row.competitor_id === offer.competitor_id).at(-1)!.price).toBe(offer.price);
  });

  it("filters as GET /products does for live keys: sku, competitor, brand and category case-insensitively, updated_since", async () => {
    const { testKey } = await testAccount();
    const all = await products(testKey);
    expect(await products(testKey, "?sku=TEST-PT-0002")).toEqual(all.filter((p) => p.sku === "TEST-PT-0002"));
    const sakura = await products(testKey, "?competitor=test_sakura");
    expect(sakura).toEqual(all.filter((p) => p.offers.some((o) => o.competitor_id === "test_sakura")));
    const brand = await products(testKey, "?brand=dewalt");
    expect(brand.length).toBeGreaterThan(0);
    expect(brand).toEqual(all.filter((p) => (p as unknown as { brand: string }).brand === "DeWalt"));
    expect((await products(testKey, "?category=BOARD%20GAMES")).length).toBe(125);
    const ndjson = await call("GET", "/products?category=Monitors", { token: testKey, headers: { Accept: "application/x-ndjson" } });
    expect((await ndjson.text()).trim().split("\n")).toHaveLength(125);
  });
});

describe("a test key's gzip list", () => {
  it("is ONE gzip member of the same products as the plain list, before and after the account's changes, JSON and NDJSON", async () => {
    const { testKey } = await testAccount();
    const same = async () => {
      const plain = await (await call("GET", "/products", { token: testKey, headers: { "Accept-Encoding": "identity" } })).text();
      const zipped = await rawGet("/products", testKey, { "Accept-Encoding": "gzip" });
      expect(zipped.headers.get("Content-Encoding")).toBe("gzip");
      expect(oneGzipMember(new Uint8Array(await zipped.arrayBuffer()))).toBe(plain);
      const lines = await rawGet("/products", testKey, { "Accept-Encoding": "gzip", Accept: "application/x-ndjson" });
      const ndjson = oneGzipMember(new Uint8Array(await lines.arrayBuffer()));
      expect(
        ndjson
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line)),
      ).toEqual(JSON.parse(plain).products);
      return JSON.parse(plain).products as Product[];
    };
    const before = await same();
    // Products spread over several of the list's parts change; the rest of the list stays as it was.
    const changed = [before[5]!, before[450]!, before[999]!];
    await expectJson(
      await simulateObservations(
        testKey,
        changed.map((product) => change(product, product.offers[0]!.currency === "JPY" ? "100" : "1.00")),
      ),
      200,
    );
    const after = await same();
    expect(after.filter((product, i) => JSON.stringify(product) !== JSON.stringify(before[i]))).toHaveLength(3);
  });
});

describe("never mixed", () => {
  it("a test key never sees live data: no live product in its list, a live product's id is 404, live competitors absent", async () => {
    const { key: live, testKey } = await testAccount();
    const sku = `LIVE-${Date.now()}`;
    await ingest([{ sku, price: "12.00", competitor: { id: "cmp_live_only", name: "Live only" } }]);
    await buildSnapshot();
    expect((await expectJson(await call("GET", `/products/${await liveIdOf(sku)}`, { token: live }), 200)).sku).toBe(sku);
    expect((await products(testKey)).some((p) => p.sku === sku)).toBe(false);
    expect(await products(testKey, `?sku=${sku}`)).toEqual([]);
    // The 404 says which environment the key reads and which key a live product needs.
    for (const path of [`/products/${await liveIdOf(sku)}`, `/products/${await liveIdOf(sku)}/history`]) {
      const { detail } = await expectJson<{ detail: string }>(await call("GET", path, { token: testKey }), 404);
      expect(detail).toMatch(/in test mode's sandbox: this is a test key \(pda_test_…\)/);
      expect(detail).toMatch(/A live product needs a live key \(pda_live_…\)/);
    }
    const { competitors } = await expectJson(await call("GET", "/competitors", { token: testKey }), 200);
    expect(competitors.some((c) => c.id === "cmp_live_only")).toBe(false);
  });

  it("a live key never sees sandbox data: no TEST- product, a sandbox product's id is 404", async () => {
    const { key: live, testKey } = await testAccount();
    await buildSnapshot();
    const [sandboxProduct] = await products(testKey, "?sku=TEST-SP-0004");
    // Sandbox ids are recognisable: the 404 names the product as test mode's and the key it needs.
    for (const path of [`/products/${sandboxProduct!.id}`, `/products/${sandboxProduct!.id}/history`]) {
      const { detail } = await expectJson<{ detail: string }>(await call("GET", path, { token: live }), 404);
      expect(detail).toMatch(/is a test-mode sandbox product, and this is a live key/);
      expect(detail).toMatch(/read it with a test key \(pda_test_…/);
    }
    // An id neither has is the plain 404.
    const unknown = await expectJson(await call("GET", "/products/prd_00000000000000000000000000000000", { token: live }), 404);
    expect(unknown.detail).not.toMatch(/sandbox/);
    expect(await products(live, "?sku=TEST-SP-0004")).toEqual([]);
    const { competitors } = await expectJson(await call("GET", "/competitors", { token: live }), 200);
    expect(competitors.some((c) => c.id.startsWith("test_"))).toBe(false);
  });
});

const liveIdOf = async (sku: string) =>
  (await env.DB.prepare("SELECT id FROM products WHERE sku = ?").bind(sku).first<{ id: string }>())!.id;

describe("POST /test/observations", () => {
  it("changes this account's sandbox only, with the ingestion's answer, history and event", async () => {
    const [a, b] = [await testAccount(), await testAccount()];
    const [product] = await products(a.testKey, "?sku=TEST-VC-0005");
    const offer = product!.offers[0]!;
    const answer = await expectJson(await simulateObservations(a.testKey, [change(product!, "1.23")]), 200);
    expect(answer).toEqual({
      received: 1,
      products_created: 0,
      offers_created: 0,
      price_changes: 1,
      stock_changes: 0,
      test_deliveries: { queued: 0, held_back: 0, budget: "600 test deliveries per minute", refills_at: null }, // no test webhook
    });

    const after = await expectJson(await call("GET", `/products/${product!.id}`, { token: a.testKey }), 200);
    expect(after.offers.find((o) => o.competitor_id === offer.competitor_id)).toMatchObject({ price: "1.23", previous_price: offer.price });
    // The offers it did not touch are the base's, as before.
    const others = (offers: readonly { competitor_id: string }[]) => offers.filter((o) => o.competitor_id !== offer.competitor_id);
    expect(others(after.offers)).toEqual(others(product!.offers));
    expect((await products(a.testKey, "?sku=TEST-VC-0005"))[0]).toEqual(after);
    const { history } = await expectJson(await call("GET", `/products/${product!.id}/history`, { token: a.testKey }), 200);
    expect(history.at(-1)).toMatchObject({ competitor_id: offer.competitor_id, price: "1.23" });
    // The same call again is a replay of the same price: nothing changes.
    expect(await expectJson(await simulateObservations(a.testKey, [change(product!, "1.23")]), 200)).toMatchObject({ price_changes: 0 });

    // Another account's sandbox is untouched.
    const otherView = await expectJson(await call("GET", `/products/${product!.id}`, { token: b.testKey }), 200);
    expect(otherView.offers.find((o) => o.competitor_id === offer.competitor_id)!.price).toBe(offer.price);
    expect((await products(b.testKey, "?sku=TEST-VC-0005"))[0]!.offers[0]!.price).toBe(offer.price);
  });

  it("a total (price + shipping_cost) beyond 2^53-1 minor units: 400 naming the field, nothing written", async () => {
    const { testKey } = await testAccount();
    const [product] = await products(testKey, "?sku=TEST-VC-0005");
    const offer = product!.offers.find((o) => o.currency === "USD") ?? product!.offers[0]!;
    const tooLarge = { ...change(product!, "90071992547409.91", offer), currency: "USD", shipping_cost: "0.01" };
    const refused = await expectJson(await simulateObservations(testKey, [change(product!, "4.00"), tooLarge]), 400);
    expect(refused.detail).toMatch(/^Invalid body: observations\.1\.price: with shipping_cost 0\.01, the total is over/);
    expect((await products(testKey, "?sku=TEST-VC-0005"))[0]).toEqual(product);
  });

  it("a live key is 403 naming the environment, and changes nothing", async () => {
    const { key: live, testKey } = await testAccount();
    const [product] = await products(testKey, "?sku=TEST-BK-0006");
    const refused = await expectJson(await simulateObservations(live, [change(product!, "2.00")]), 403);
    expect(refused.detail).toMatch(/live key/);
    expect(refused.detail).toMatch(/test key/);
    expect((await products(testKey, "?sku=TEST-BK-0006"))[0]).toEqual(product);
  });

  it("only sandbox SKUs and competitors, at most 100 observations: 400 naming them, nothing written", async () => {
    const { testKey } = await testAccount();
    const [product] = await products(testKey, "?sku=TEST-SH-0007");
    const bad = await expectJson(
      await simulateObservations(testKey, [change(product!, "3.00"), { ...change(product!, "3.00"), sku: "KET-1000" }]),
      400,
    );
    expect(bad.detail).toMatch(/^Invalid body: observations\.1\.sku: not a sandbox product: "KET-1000" does not begin TEST-/);
    // A SKU that begins TEST- but is not the sandbox's is told why, and what the sandbox's look like.
    const made = await expectJson(
      await simulateObservations(testKey, [
        { ...change(product!, "3.00"), sku: "TEST-NEW-1" },
        { ...change(product!, "3.00"), sku: "TEST-CF-0002" },
      ]),
      400,
    );
    expect(made.detail).toMatch(/"TEST-NEW-1" is not of the form TEST-<line code>-<4 digits>/);
    expect(made.detail).toMatch(/"TEST-CF-0002" has the form, but no sandbox product has it/);
    expect(made.detail).toMatch(/\(CF, PT, MN, SP, VC, BK, SH, BG\)/);
    expect(made.detail).toMatch(/e\.g\. TEST-CF-0001 or TEST-PT-0002/);
    const shop = await expectJson(
      await simulateObservations(testKey, [{ ...change(product!, "3.00"), competitor: { id: "cmp_amazon", name: "Amazon" } }]),
      400,
    );
    expect(shop.detail).toMatch(/cmp_amazon/);
    const many = await expectJson(
      await simulateObservations(
        testKey,
        Array.from({ length: 101 }, () => change(product!, "3.00")),
      ),
      400,
    );
    expect(many.detail).toMatch(/observations: must hold at most 100/);
    expect((await products(testKey, "?sku=TEST-SH-0007"))[0]).toEqual(product);
  });

  it("a sandbox change keeps the offer's terms it leaves out (url, shipping, seller, …); null clears one", async () => {
    const { testKey } = await testAccount();
    // An offer with a page and a known shipping cost, in a currency with cents.
    const shipped = (o: Product["offers"][number]) =>
      (o as { shipping_cost?: string | null }).shipping_cost != null && o.currency !== "JPY";
    const product = (await products(testKey, "?category=Monitors")).find((p) => p.offers.some(shipped));
    const offer = (await expectJson(await call("GET", `/products/${product!.id}`, { token: testKey }), 200)).offers.find(
      (o) => o.shipping_cost !== null && o.currency !== "JPY",
    )!;
    expect(offer.url).not.toBeNull();
    const observation = { ...change(product!, "1.00", offer), seller: "Second seller" };
    expect(await expectJson(await simulateObservations(testKey, [observation]), 200)).toMatchObject({ price_changes: 1 });
    const after = await expectJson(await call("GET", `/products/${product!.id}`, { token: testKey }), 200);
    const changed = after.offers.find((o) => o.competitor_id === offer.competitor_id)!;
    expect(changed).toMatchObject({ price: "1.00", url: offer.url, shipping_cost: offer.shipping_cost, seller: "Second seller" });
    const { events } = await expectJson(await call("GET", "/events?type=price.changed", { token: testKey }), 200);
    expect(events.at(-1)!.data).toMatchObject({ url: offer.url, new_total_price: expect.any(String) });
    // Given, a term replaces the offer's; null clears it (as in a live observation).
    await expectJson(await simulateObservations(testKey, [{ ...change(product!, "2.00", offer), url: null, shipping_cost: "0" }]), 200);
    const cleared = (await expectJson(await call("GET", `/products/${product!.id}`, { token: testKey }), 200)).offers.find(
      (o) => o.competitor_id === offer.competitor_id,
    )!;
    expect(cleared).toMatchObject({ price: "2.00", url: null, shipping_cost: "0.00", seller: "Second seller" });
  });

  it("a new offer from a sandbox shop on a sandbox product is created, and a stock change is an event", async () => {
    const { testKey } = await testAccount();
    const [product] = await products(testKey, "?sku=TEST-BG-0008");
    const absent = SANDBOX_SHOPS.find((shop) => !product!.offers.some((o) => o.competitor_id === shop.id))!;
    const created = await expectJson(
      await simulateObservations(testKey, [
        {
          sku: product!.sku,
          name: "x",
          competitor: { id: absent.id, name: absent.name },
          price: "100",
          currency: absent.currency,
          in_stock: true,
        },
      ]),
      200,
    );
    expect(created).toMatchObject({ offers_created: 1 });
    const stock = await expectJson(
      await simulateObservations(testKey, [{ ...change(product!, product!.offers[0]!.price), in_stock: !product!.offers[0]!.in_stock }]),
      200,
    );
    expect(stock).toMatchObject({ stock_changes: 1, price_changes: 0 });
    const after = await expectJson(await call("GET", `/products/${product!.id}`, { token: testKey }), 200);
    expect(after.offers).toHaveLength(product!.offers.length + 1);
  });
});

describe("the sandbox's own data", () => {
  it("is kept 7 days in the account's object: its daily alarm deletes older changes, history and events; newer ones stay", async () => {
    const { sub, testKey } = await testAccount();
    const [product] = await products(testKey, "?sku=TEST-CF-0001");
    // A change through the API (which sets the object's alarm), and rows 8 days old beside it.
    expect((await simulateObservations(testKey, [change(product!, "1.00")])).status).toBe(200);
    const object = env.SANDBOX.get(env.SANDBOX.idFromName(sub));
    const old = new Date(Date.now() - 8 * 86_400_000).toISOString();
    const counts = () =>
      runInDurableObject(object, (_, state) =>
        state.storage.sql
          .exec<{ products: number; history: number; events: number }>(
            `SELECT (SELECT count(*) FROM products) AS products, (SELECT count(*) FROM history) AS history,
              (SELECT count(*) FROM events) AS events`,
          )
          .one(),
      );
    const before = await counts();
    await runInDurableObject(object, (_, state) => {
      const sql = state.storage.sql;
      sql.exec("INSERT INTO products (product_id, version, changed_at, state) VALUES ('prd_old', 1, ?, '{}')", old);
      sql.exec(
        "INSERT INTO history (product_id, competitor_id, price_minor, currency, in_stock, observed_at) VALUES ('prd_old', 'test_harbor', 1, 'USD', 1, ?)",
        old,
      );
      sql.exec("INSERT INTO events (id, type, timestamp, payload) VALUES ('evt_old', 'price.changed', ?, '{}')", old);
    });
    expect(await runDurableObjectAlarm(object)).toBe(true);
    expect(await counts()).toEqual(before);
    expect(before).toMatchObject({ products: 1, history: 1 });
    expect(before.events).toBeGreaterThan(0);
    // What it still holds keeps the alarm set for the next day.
    expect(await runInDurableObject(object, (_, state) => state.storage.getAlarm())).toBeGreaterThan(Date.now() + 86_000_000);
  });
});

describe("a test key's comparable prices", () => {
  it("sandbox offers carry the new figures, and ?currency= converts them as for a live key, worked out by hand", async () => {
    const a = await testAccount();
    const today = new Date().toISOString().slice(0, 10);
    const rates = { base: "EUR", date: today, rates: { USD: "1.2500", GBP: "0.8000", JPY: "160" } };
    expect((await call("PUT", "/admin/fx-rates", { token: await adminToken(), body: rates })).status).toBe(200);
    const [product] = await products(a.testKey, "?sku=TEST-CF-0001");
    const usd = product!.offers.find((offer) => offer.currency === "USD")!;
    // A change to 100.00 USD with free shipping: total 100.00; in EUR at 1.25 USD a euro, 80.00.
    const changed = { ...change(product!, "100.00", usd), shipping_cost: "0.00" };
    expect((await simulateObservations(a.testKey, [changed])).status).toBe(200);
    const read = await expectJson(await call("GET", `/products/${product!.id}?currency=EUR`, { token: a.testKey }), 200);
    const offer = read.offers.find((o) => o.competitor_id === usd.competitor_id)!;
    expect(offer).toMatchObject({ price: "100.00", total_price: "100.00", condition: "new", check_status: "ok" });
    // The generated history's prices count: the price held up to the change, or a lower one of its 30 days.
    expect(offer.lowest_price_30d).not.toBeNull();
    expect(Number(offer.lowest_price_30d)).toBeLessThanOrEqual(Number(usd.price));
    expect(offer.converted).toEqual({ currency: "EUR", price: "80.00", total_price: "80.00", rate: "0.8", rate_date: today });
    const [listed] = await products(a.testKey, "?sku=TEST-CF-0001&currency=EUR");
    expect((listed as unknown as typeof read).offers.find((o) => o.competitor_id === usd.competitor_id)!.converted).toEqual(
      offer.converted,
    );
    expect(read.summary.currency).toBe("EUR");
  });
});
