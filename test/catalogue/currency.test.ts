import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { PUBLISHED_RATES_KEY } from "../../src/fx-rates/published.ts";
import { forgetIsolateMemory } from "../../src/platform/isolate-memory.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson, workMeter } from "../helpers/http.ts";
import { postMcp, toolCall } from "../helpers/mcp.ts";
import { adminToken } from "../helpers/tokens.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * PUT /admin/fx-rates and `?currency=`: every converted figure below is worked out by hand from the rates (EUR base:
 * USD 1.0832, JPY 162.45, KWD 0.3331), converting through EUR and rounding half-even to the target's minor unit.
 */

let key: string;
const SKU = "FX-KETTLE";
const BRAND = "Fx Kettles";
const offers = [
  { competitor: { id: "fx-us", name: "US shop" }, price: "19.99", currency: "USD", shipping_cost: "5.00" },
  { competitor: { id: "fx-eu", name: "EU shop" }, price: "25.00", currency: "EUR" },
  { competitor: { id: "fx-jp", name: "JP shop" }, price: "3000", currency: "JPY", shipping_cost: "0" },
  { competitor: { id: "fx-kw", name: "KW shop" }, price: "5.250", currency: "KWD", in_stock: false },
  { competitor: { id: "fx-gb", name: "GB shop" }, price: "10.00", currency: "GBP" },
];
const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
const putRates = async (date: string, rates: Record<string, string>, base = "EUR") =>
  call("PUT", "/admin/fx-rates", { token: await adminToken(), body: { base, date, rates } });
let productId: string;

const getProduct = async (currency?: string) =>
  expectJson(await call("GET", `/products/${productId}${currency ? `?currency=${currency}` : ""}`, { token: key }), 200) as Promise<
    Schemas["Product"]
  >;
const convertedOf = (product: Schemas["Product"]) =>
  Object.fromEntries(product.offers.map((offer) => [offer.competitor_id, offer.converted]));

/** The converted prices in the order of `offers` (us, eu, jp, kw, gb). */
const pricesOf = (product: Schemas["Product"]) => offers.map(({ competitor }) => convertedOf(product)[competitor.id]?.price ?? null);

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await ingest(offers.map((offer) => ({ sku: SKU, brand: BRAND, ...offer })));
  await publishSnapshot();
  const list = await expectJson(await call("GET", `/products?sku=${SKU}`, { token: key }), 200);
  productId = list.products[0]!.id;
});

const refusal = async (path: string) => (await expectJson<{ detail: string }>(await call("GET", path, { token: key }), 400)).detail;
const fxRates = async () => expectJson(await call("GET", "/fx-rates", { token: key }), 200);

describe("?currency= before any rates", () => {
  it("is refused, naming the currency and GET /fx-rates, which lists none yet", async () => {
    expect(await refusal(`/products/${productId}?currency=EUR`)).toBe(
      "currency: EUR has no exchange rate yet (none are stored), so no price can be converted into it; GET /fx-rates lists the currencies that have one.",
    );
    expect(await refusal(`/products?sku=${SKU}&currency=EUR`)).toContain("GET /fx-rates");
    expect(await fxRates()).toEqual({ base: null, date: null, rates: {}, currencies: [] });
  });
});

describe("PUT /admin/fx-rates", () => {
  it("stores a day's rates; refuses the base among them, an unknown code, a number and a non-positive rate", async () => {
    expect(await expectJson(await putRates(day(-3), { USD: "1.2000" }), 200)).toMatchObject({
      base: "EUR",
      date: day(-3),
      rates: { USD: "1.2000" },
    });
    const detail = async (res: Response) => (await expectJson<{ detail: string }>(res, 400)).detail;
    expect(await detail(await putRates(day(0), { EUR: "1" }))).toBe("Invalid body: rates.EUR: must be left out: the base's rate is 1");
    expect(await detail(await putRates(day(0), { usd: "1.08" }))).toContain("usd: not a supported ISO-4217 currency code");
    expect(await detail(await putRates(day(0), { USD: 1.08 } as never))).toContain("rates.USD: must be a decimal string");
    expect(await detail(await putRates(day(0), { USD: "0" }))).toContain("rates.USD: must be a positive decimal string");
    expect(await detail(await putRates(day(0), {}))).toBe("Invalid body: rates: must hold at least one rate");
    expect(await detail(await putRates("2026-13-01", { USD: "1" }))).toBe("Invalid body: date: must be a date, YYYY-MM-DD");
  });

  it("a rate on an earlier day is used until a later one (not after today) arrives; a currency without a rate is null", async () => {
    // Only USD 1.2000, three days ago: 19.99 USD = 16.658… EUR → 16.66; 24.99 → 20.825 → 20.82 (a tie, to the even).
    let converted = convertedOf(await getProduct("EUR"));
    expect(converted["fx-us"]).toEqual({ currency: "EUR", price: "16.66", total_price: "20.82", rate: "0.8333333333", rate_date: day(-3) });
    expect(converted["fx-eu"]).toEqual({ currency: "EUR", price: "25.00", total_price: null, rate: "1", rate_date: day(-3) });
    expect(converted["fx-jp"]).toBeNull();
    // Tomorrow's rates are not today's.
    await expectJson(await putRates(day(1), { USD: "2" }), 200);
    converted = convertedOf(await getProduct("EUR"));
    expect(converted["fx-us"]?.rate_date).toBe(day(-3));
    await expectJson(await putRates(day(0), { USD: "1.0832", JPY: "162.45", KWD: "0.3331" }), 200);
    expect(convertedOf(await getProduct("EUR"))["fx-us"]?.rate_date).toBe(day(0));
  });
});

describe("?currency= with today's rates", () => {
  it("EUR (2 decimals): each offer through the base, rounded half-even; the summary over the converted offers", async () => {
    const product = await getProduct("EUR");
    expect(convertedOf(product)).toEqual({
      // 19.99 ÷ 1.0832 = 18.4545…; 24.99 ÷ 1.0832 = 23.0705…
      "fx-us": { currency: "EUR", price: "18.45", total_price: "23.07", rate: "0.9231905465", rate_date: day(0) },
      "fx-eu": { currency: "EUR", price: "25.00", total_price: null, rate: "1", rate_date: day(0) },
      // 3000 ÷ 162.45 = 18.4672…
      "fx-jp": { currency: "EUR", price: "18.47", total_price: "18.47", rate: "0.0061557402", rate_date: day(0) },
      // 5.250 ÷ 0.3331 = 15.7610…; the rate 1 ÷ 0.3331 = 3.00210147102… to 10 places, its trailing 0 dropped
      "fx-kw": { currency: "EUR", price: "15.76", total_price: null, rate: "3.002101471", rate_date: day(0) },
      "fx-gb": null,
    });
    // min_price is the KW shop's, out of stock or not; GBP has no rate and is left out; the counts count every offer.
    // lowest_offer is what a buyer pays least for, across currencies: in stock, delivered (JP's 18.47 with free shipping,
    // below the EU shop's 25.00 and the US shop's 23.07 delivered).
    expect(product.summary).toEqual({
      min_price: "15.76",
      max_price: "25.00",
      currency: "EUR",
      offer_count: 5,
      in_stock_count: 4,
      lowest_competitor_id: "fx-kw",
      lowest_offer: { competitor_id: "fx-jp", price: "18.47", total_price: "18.47", currency: "EUR" },
    });
  });

  it("JPY (no decimals) and KWD (3 decimals)", async () => {
    const jpy = await getProduct("JPY");
    // 19.99 × 162.45 ÷ 1.0832 = 2,997.97…; 25.00 × 162.45 = 4,061.25; 5.250 × 162.45 ÷ 0.3331 = 2,560.38…
    expect(pricesOf(jpy)).toEqual(["2998", "4061", "3000", "2560", null]);
    expect(jpy.summary).toMatchObject({ min_price: "2560", max_price: "4061", currency: "JPY" });
    const kwd = await getProduct("KWD");
    // 25.00 × 0.3331 = 8.3275: a tie at the third decimal, to the even 8.328; 3000 × 0.3331 ÷ 162.45 = 6.1514…
    expect(pricesOf(kwd)).toEqual(["6.147", "8.328", "6.151", "5.250", null]);
    expect(convertedOf(kwd)["fx-us"]?.total_price).toBe("7.685"); // 24.99 × 0.3331 ÷ 1.0832 = 7.6847…
  });

  it("the list gives each product as the single read does, and its ETag follows the rates", async () => {
    const read = async () => call("GET", `/products?sku=${SKU}&currency=KWD`, { token: key });
    const first = await read();
    const list = await expectJson(first, 200);
    expect(list.products).toEqual([await getProduct("KWD")]);
    const whole = await expectJson(await call("GET", "/products?currency=KWD", { token: key }), 200);
    expect(whole.products.find((p) => p.id === productId)).toEqual(await getProduct("KWD"));
    const plain = await expectJson(await call("GET", `/products?sku=${SKU}`, { token: key }), 200);
    expect(plain.products[0]!.offers.every((offer) => !("converted" in offer))).toBe(true);
    await expectJson(await putRates(day(0), { USD: "1.0900", JPY: "162.45", KWD: "0.3331" }), 200);
    const second = await read();
    expect(second.headers.get("ETag")).not.toBe(first.headers.get("ETag"));
    expect((await expectJson(second, 200)).products[0]!.offers[0]!.converted?.rate_date).toBe(day(0));
  });

  it("GET /fx-rates lists the rates it converts with and their day; a currency without a rate is refused, in REST and in MCP", async () => {
    expect(await fxRates()).toEqual({
      base: "EUR",
      date: day(0),
      rates: { USD: "1.0900", JPY: "162.45", KWD: "0.3331" },
      currencies: ["EUR", "JPY", "KWD", "USD"],
    });
    // GBP exists (offers are priced in it) but has no rate today: a 400 naming it, not a 200 of nulls.
    expect(await refusal(`/products/${productId}?currency=GBP`)).toBe(
      `currency: GBP has no exchange rate on ${day(0)}, so no price can be converted into it; GET /fx-rates lists the currencies that have one.`,
    );
    expect(await refusal("/products?currency=VND")).toContain("currency: VND has no exchange rate");
    const tool = await (await postMcp(key, toolCall(1, "get_product", { id: productId, currency: "GBP" }))).json<{ result: unknown }>();
    expect(tool.result).toMatchObject({ isError: true, content: [{ text: expect.stringContaining("GBP has no exchange rate") }] });
    const search = await (await postMcp(key, toolCall(2, "search_products", { sku: SKU, currency: "VND" }))).json<{ result: unknown }>();
    expect(search.result).toMatchObject({ isError: true, content: [{ text: expect.stringContaining("GET /fx-rates") }] });
  });

  it("refuses a currency it does not know", async () => {
    expect((await expectJson(await call("GET", `/products/${productId}?currency=XXX`, { token: key }), 400)).detail).toContain(
      'currency: "XXX" is not a supported ISO-4217 currency code',
    );
  });
});

describe("?currency= reads its rates from R2, not D1", () => {
  const statements = async (path: string) => workMeter(await call("GET", path, { token: key }))["d1-statements"];

  it("a warm converted read makes no D1 statement for the rates: the product, and a filtered list", async () => {
    await getProduct("EUR"); // this isolate now keeps the rates
    expect(await statements(`/products/${productId}?currency=EUR`)).toBe(0);
    expect(await statements(`/products/${productId}?currency=EUR`)).toBe(await statements(`/products/${productId}`));
    const brand = `/products?brand=${encodeURIComponent(BRAND)}`;
    expect(await statements(`${brand}&currency=EUR`)).toBe(await statements(brand));
  });

  it("another isolate's PUT shows within a second: the kept rates are read from R2 again once they are a second old", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 5000); // past what the isolate keeps: the next read reads R2
      expect(convertedOf(await getProduct("EUR"))["fx-us"]?.rate).toBe("0.9174311927"); // 1 ÷ 1.0900, kept from here on
      // What a PUT of USD 1.25 for today in another isolate leaves in R2 (its D1 row aside): this isolate has not seen it.
      const published = await (await env.CATALOGUE.get(PUBLISHED_RATES_KEY))!.json<{
        days: { date: string; rates: Record<string, string> }[];
      }>();
      const today = published.days.find((rates) => rates.date === day(0))!;
      today.rates = { ...today.rates, USD: "1.25" };
      await env.CATALOGUE.put(PUBLISHED_RATES_KEY, JSON.stringify(published));
      vi.setSystemTime(Date.now() + 999);
      expect(convertedOf(await getProduct("EUR"))["fx-us"]?.rate).toBe("0.9174311927");
      vi.setSystemTime(Date.now() + 2);
      expect(convertedOf(await getProduct("EUR"))["fx-us"]?.rate).toBe("0.8");
    } finally {
      vi.useRealTimers();
    }
  });

  it("publishes D1's rates when R2 has none (a new deployment, or after the seed), once", async () => {
    await env.CATALOGUE.delete(PUBLISHED_RATES_KEY);
    forgetIsolateMemory();
    expect(convertedOf(await getProduct("EUR"))["fx-us"]).toMatchObject({ rate: "0.9174311927", rate_date: day(0) }); // D1's USD 1.0900
    expect(await env.CATALOGUE.head(PUBLISHED_RATES_KEY)).not.toBeNull();
    expect(await statements(`/products/${productId}?currency=EUR`)).toBe(0);
  });
});
