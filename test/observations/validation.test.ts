import { env } from "cloudflare:workers";
import { count } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from "vitest";
import type { ApiError } from "../../client/index.ts";
import type { WebhookMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { catalogueState, competitors, offers, priceHistory, products } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { adminToken } from "../helpers/tokens.ts";
import { ingest, observation, postObservations } from "../helpers/webhooks.ts";

const db = () => database(env.DB);
let sent: MockInstance<Queue<WebhookMessage>["sendBatch"]>;

beforeEach(() => {
  sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch");
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** Every table ingestion writes, and the catalogue version. */
async function snapshot() {
  const [p, o, h, c, v] = await db().batch([
    db().select({ n: count() }).from(products),
    db().select({ n: count() }).from(offers),
    db().select({ n: count() }).from(priceHistory),
    db().select({ n: count() }).from(competitors),
    db().select().from(catalogueState),
  ]);
  return { products: p[0]!.n, offers: o[0]!.n, history: h[0]!.n, competitors: c[0]!.n, version: v[0]?.version ?? 0 };
}

/** Refused with `status`, nothing written, nothing sent; returns the detail. */
async function expectRefused(res: Response | Promise<Response>, status = 400): Promise<string> {
  const before = await snapshot();
  const { detail } = await expectJson<ApiError>(await res, status);
  expect(await snapshot()).toEqual(before);
  expect(sent).not.toHaveBeenCalled();
  return detail;
}

const good = (i: number) => observation({ sku: `VALID-${i}`, observed_at: "2026-03-01T00:00:00Z" });

/** A batch of three valid observations with `bad` as the fourth (index 3): all or nothing. */
const withBad = (bad: Record<string, unknown>) => [good(0), good(1), good(2), { ...good(3), ...bad }];

const { sku: _sku, ...withoutSku } = good(3);
const { in_stock: _stock, ...withoutStock } = good(3);

describe("POST /admin/observations refuses a bad observation with 400 naming it, and writes nothing", () => {
  // Seed an offer first, so "nothing written" also covers updates to existing rows.
  beforeEach(async () => {
    await ingest([{ sku: "VALID-0", price: "1.00", observed_at: "2026-01-01T00:00:00Z" }]);
    sent.mockClear();
  });

  const cases: [string, unknown[], RegExp][] = [
    ["a negative price", withBad({ price: "-1.00" }), /observations\.3\.price: must not be negative/],
    ["a non-numeric price", withBad({ price: "ten" }), /observations\.3\.price: must be a decimal string/],
    ["a price as a JSON number", withBad({ price: 10.5 }), /observations\.3\.price: must be a decimal string/],
    ["a price with an exponent", withBad({ price: "1e3" }), /observations\.3\.price: must be written without an exponent/],
    ["more decimals than the currency has", withBad({ price: "10.5", currency: "JPY" }), /observations\.3\.price: must be a whole number/],
    ["a negative shipping cost", withBad({ shipping_cost: "-0.01" }), /observations\.3\.shipping_cost: must not be negative/],
    ["an unknown currency", withBad({ currency: "XYZ" }), /observations\.3\.currency: "XYZ" is not a supported ISO-4217 currency code/],
    ["a lower-case currency", withBad({ currency: "usd" }), /observations\.3\.currency/],
    ["a missing sku", [good(0), good(1), good(2), withoutSku], /observations\.3\.sku: is required/],
    ["an empty sku", withBad({ sku: "  " }), /observations\.3\.sku: must not be empty/],
    ["a sku of the wrong type", withBad({ sku: 42 }), /observations\.3\.sku: must be a string/],
    ["in_stock of the wrong type", withBad({ in_stock: "yes" }), /observations\.3\.in_stock: must be true or false/],
    ["a missing in_stock", [good(0), good(1), good(2), withoutStock], /observations\.3\.in_stock: is required/],
    ["a competitor that is not an object", withBad({ competitor: "amazon" }), /observations\.3\.competitor: must be a JSON object/],
    ["a competitor id with spaces", withBad({ competitor: { id: "amazon com", name: "Amazon" } }), /observations\.3\.competitor\.id/],
    ["an observed_at that is not a date", withBad({ observed_at: "yesterday" }), /observations\.3\.observed_at: must be an ISO-8601/],
    [
      "an observed_at in the future",
      withBad({ observed_at: "2099-01-01T00:00:00Z" }),
      /observations\.3\.observed_at: must not be in the future/,
    ],
    ["an unknown field", withBad({ colour: "red" }), /observations\.3.*colour/],
    ["a url that is not http(s)", withBad({ url: "javascript:alert(1)" }), /observations\.3\.url/],
    // RFC 3986 is ASCII only (the document's format: uri): an internationalised host arrives punycoded.
    [
      "a url with a non-ASCII host (the fuzzer's)",
      withBad({ url: "https://\u00cf" }),
      /observations\.3\.url: must be an absolute RFC 3986 URI/,
    ],
    [
      "a url with a non-ASCII path",
      withBad({ url: "https://shop.example/caf\u00e9" }),
      /observations\.3\.url: must be an absolute RFC 3986 URI/,
    ],
    ["a url with a space", withBad({ url: "https://shop.example/a b" }), /observations\.3\.url: must be an absolute RFC 3986 URI/],
    [
      "a url with a bad percent escape",
      withBad({ url: "https://shop.example/100%" }),
      /observations\.3\.url: must be an absolute RFC 3986 URI/,
    ],
    ["a gtin that is not digits", withBad({ gtin: "ABC" }), /observations\.3\.gtin: must be 8 to 14 digits/],
    // Each amount fits, their total (2^53 minor units) does not: every catalogue build would fail on it.
    [
      "a total (price + shipping_cost) of 2^53 minor units",
      withBad({ price: "90071992547409.91", shipping_cost: "0.01" }),
      /observations\.3\.price: with shipping_cost 0\.01, the total is over 9,007,199,254,740,991 minor units of USD/,
    ],
    [
      "a total of 2^53 yen",
      withBad({ price: "9007199254740000", shipping_cost: "992", currency: "JPY" }),
      /observations\.3\.price: with shipping_cost 992, the total is over .* minor units of JPY/,
    ],
  ];

  for (const [what, observations, detail] of cases) {
    it(what, async () => {
      expect(await expectRefused(postObservations(observations))).toMatch(detail);
    });
  }

  it("a total of exactly 2^53-1 minor units is taken, and served", async () => {
    const res = await postObservations([{ ...good(9), price: "90071992547409.90", shipping_cost: "0.01" }]);
    expect(res.status).toBe(200);
  });

  it("1,001 observations (1,000 is the most a call takes)", async () => {
    const observations = Array.from({ length: 1001 }, (_, i) => good(i));
    expect(await expectRefused(postObservations(observations))).toMatch(/observations: must hold at most 1,000 observations/);
  });

  it("no observations, a missing list, a list of the wrong type, a body that is not JSON", async () => {
    expect(await expectRefused(postObservations([]))).toMatch(/observations: must hold at least one/);
    const admin = await adminToken();
    expect(await expectRefused(call("POST", "/admin/observations", { token: admin, body: {} }))).toMatch(/observations: is required/);
    expect(await expectRefused(call("POST", "/admin/observations", { token: admin, body: { observations: "x" } }))).toMatch(
      /observations: must be an array/,
    );
    expect(await expectRefused(call("POST", "/admin/observations", { token: admin, body: "{not json" }))).toMatch(/not valid JSON/);
  });
});

describe("POST /admin/observations credentials", () => {
  it("needs the prices:write scope (403), an admin JWT rather than an API key (403), and a credential (401)", async () => {
    const body = { observations: [good(0)] };
    const plansOnly = await adminToken("plans-admin", "accounts:write");
    expect(await expectRefused(call("POST", "/admin/observations", { token: plansOnly, body }), 403)).toMatch(/prices:write/);
    const { key } = await freshAccount({ plan: "premium" });
    await expectRefused(call("POST", "/admin/observations", { token: key, body }), 403);
    await expectRefused(call("POST", "/admin/observations", { body }), 401);
  });
});
