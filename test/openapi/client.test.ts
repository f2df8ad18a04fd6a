import { exports } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createPriceDataClient,
  type RetryOptions,
  retryAfterSeconds,
  retryDelayMs,
  verifyWebhook,
  WebhookVerificationError,
} from "../../client/index.ts";
import committed from "../../client/openapi.json";
import { freshAccount } from "../helpers/accounts.ts";
import { createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";
import { DocumentChecker, fetchDocument } from "../helpers/openapi.ts";
import { settled } from "../helpers/settle.ts";
import { accountToken, adminToken } from "../helpers/tokens.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";

/**
 * The typed client (client/) against the real worker: its fetch is the worker's own fetch handler.
 * Waits are recorded by an injected sleep instead of passing, except where cancelling a real timer is the point.
 */

const BASE = "https://api.test";
const worker = (request: Request) => exports.default.fetch(request);

/** A client whose requests are counted and whose waits are recorded (and skipped). */
function client(token: string, retry: RetryOptions = {}, fetch: (request: Request) => Promise<Response> = worker) {
  const waits: number[] = [];
  const retryAfters: (string | null)[] = [];
  const sent: string[] = [];
  const api = createPriceDataClient({
    baseUrl: BASE,
    token,
    fetch: (request) => {
      sent.push(`${request.method} ${new URL(request.url).pathname}`);
      return fetch(request);
    },
    retry: {
      sleep: async (ms) => void waits.push(ms),
      onRetry: ({ response }) => void retryAfters.push(response.headers.get("Retry-After")),
      ...retry,
    },
  });
  return { api, waits, retryAfters, sent };
}

/** A Free key (10 a minute) with its minute spent. */
async function spentFreeKey() {
  const account = await freshAccount({ plan: "free" });
  for (let i = 0; i < 10; i++) expect((await call("GET", "/competitors", { token: account.key })).status).toBe(200);
  expect((await call("GET", "/competitors", { token: account.key })).status).toBe(429);
  return account;
}

describe("client/openapi.json and the worker", () => {
  it("the committed document is the one the worker serves (client/schema.d.ts is generated from it; test/node checks that)", async () => {
    expect(await fetchDocument()).toEqual(committed);
  });
});

describe("typed calls", () => {
  it("lists products with filters, reads one, and manages keys with an account login", async () => {
    await createCompetitor({ id: "cmp_client", name: "Client Shop" });
    const product = await createProduct({ brand: "ClientBrand", offers: [{ competitor: "cmp_client", price: "9.99" }] });
    await publishSnapshot();
    const { key, token } = await freshAccount({ plan: "premium" });

    const { api } = client(key);
    const { data, error, response } = await api.GET("/products", { params: { query: { brand: "clientbrand" } } });
    expect(error, JSON.stringify(error)).toBeUndefined();
    expect(response.status).toBe(200);
    expect(data!.products.map((p) => p.id)).toEqual([product.id]);
    expect(data!.products[0]!.offers[0]!.price).toBe("9.99");

    const one = await api.GET("/products/{id}", { params: { path: { id: product.id } } });
    expect(one.data?.summary.min_price).toBe("9.99");
    const missing = await api.GET("/products/{id}", { params: { path: { id: "prd_missing" } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.detail).toContain("prd_missing");

    const account = client(token).api;
    const created = await account.POST("/api-keys", { body: { name: "From the client" } });
    expect(created.response.status).toBe(201);
    expect(created.data!.key).toMatch(/^pda_live_/);
    const renamed = await account.PATCH("/api-keys/{id}", { params: { path: { id: created.data!.id } }, body: { name: "Renamed" } });
    expect(renamed.data?.name).toBe("Renamed");
    const refused = await client(key).api.GET("/api-keys");
    expect(refused.response.status).toBe(403);
  });
});

describe("the 429 rule", () => {
  it("waits Retry-After seconds, then tries again and succeeds", async () => {
    const { sub, key } = await spentFreeKey();
    const admin = await adminToken();
    const { api, waits, retryAfters, sent } = client(key, {
      // While "waiting", the account moves to Premium: its key's next request is admitted.
      sleep: async (ms) => {
        waits.push(ms);
        await expectJson(await call("PUT", `/admin/accounts/${sub}/plan`, { token: admin, body: { plan: "premium" } }), 200);
      },
    });
    const { data, response } = await api.GET("/competitors");
    expect(response.status).toBe(200);
    expect(data?.competitors).toBeDefined();
    expect(sent).toHaveLength(2);
    expect(waits).toEqual([Number(retryAfters[0]) * 1000]);
    expect(Number(retryAfters[0])).toBeGreaterThanOrEqual(1);
    expect(response.headers.get("X-RateLimit-Limit")).toBe("300");
  });

  it("backs off exponentially with jitter on repeated 429s, and after maxAttempts returns the 429 with its detail", async () => {
    const { key } = await spentFreeKey();
    const randoms = [0, 0.5]; // drawn from the second wait on
    const { api, waits, retryAfters, sent } = client(key, { maxAttempts: 4, random: () => randoms.shift()! });
    const { data, error, response } = await api.GET("/competitors");
    expect(data).toBeUndefined();
    expect(response.status).toBe(429);
    expect(error).toEqual({ detail: "Rate limit exceeded: 10 requests per minute.", help: expect.stringMatching(/^Retry after \d+ s /) });
    expect(sent).toHaveLength(4);
    expect(waits).toHaveLength(3);
    const ra = retryAfters.map((value) => Number(value) * 1000);
    expect(waits[0]).toBe(ra[0]); // the first wait is the server's Retry-After exactly
    expect(waits[1]).toBe(Math.round(ra[1]! * 2)); // × 2, random 0: no stretch
    expect(waits[2]).toBe(Math.round(ra[2]! * 4 * (1 + 0.5 * 0.5))); // × 4, stretched by 25 %
  });

  it("waits 60 s when a 429 has no Retry-After", async () => {
    const { key } = await spentFreeKey();
    const withoutRetryAfter = async (request: Request) => {
      const res = await worker(request);
      const headers = new Headers(res.headers);
      headers.delete("Retry-After");
      return new Response(res.body, { status: res.status, headers });
    };
    const { api, waits } = client(key, { maxAttempts: 2 }, withoutRetryAfter);
    expect((await api.GET("/competitors")).response.status).toBe(429);
    expect(waits).toEqual([60_000]);
  });

  it("can be cancelled with an AbortSignal while it waits (a real timer), and sends nothing once aborted", async () => {
    const { key } = await spentFreeKey();
    const sent: string[] = [];
    const api = createPriceDataClient({
      baseUrl: BASE,
      token: key,
      fetch: (request) => {
        sent.push(request.url);
        return worker(request);
      },
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    // Rejected by the abort, not after the 60 s Retry-After: a wait not cancelled would outlast the test's 20 s.
    await expect(api.GET("/competitors", { signal: controller.signal })).rejects.toMatchObject({ name: "AbortError" });
    expect(sent).toHaveLength(1);

    await expect(api.GET("/competitors", { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: "AbortError" });
    expect(sent).toHaveLength(1);
  });

  it("retryDelayMs: never below Retry-After, doubling from the second 429, jitter within [1, 1 + jitter), capped", () => {
    for (const retryAfter of [1, 7, 60]) {
      for (let n = 1; n <= 8; n++) {
        const low = retryDelayMs(retryAfter, n, { random: () => 0 });
        const high = retryDelayMs(retryAfter, n, { random: () => 0.999999 });
        const base = Math.min(retryAfter * 1000 * 2 ** (n - 1), 15 * 60_000);
        expect(low).toBe(Math.max(retryAfter * 1000, base));
        expect(high).toBeGreaterThanOrEqual(low);
        expect(high).toBeLessThanOrEqual(n === 1 ? low : Math.min(Math.max(retryAfter * 1000 * 2 ** (n - 1) * 1.5, low), 15 * 60_000));
      }
    }
    expect(retryDelayMs(1200, 3, { maxDelayMs: 60_000 })).toBe(1_200_000); // the server's word beats the cap
    expect(retryAfterSeconds("5")).toBe(5);
    expect(retryAfterSeconds(new Date(Date.now() + 30_000).toUTCString())).toBeGreaterThanOrEqual(29);
    expect(retryAfterSeconds("soon")).toBeUndefined();
    expect(retryAfterSeconds(null)).toBeUndefined();
  });
});

describe("webhook verification", () => {
  let receiver: Receiver;
  beforeAll(() => {
    receiver = installReceiver();
  });
  afterAll(() => {
    receiver.assertNoStrayRequests();
    vi.restoreAllMocks();
  });

  it("verifies real deliveries (a test event and a price change) and refuses a tampered one; the events match the document", async () => {
    const checker = new DocumentChecker(await fetchDocument());
    const url = hookUrl("client");
    const { api } = client(await accountToken(`client-hooks-${Date.now()}`));
    const created = await api.POST("/webhooks", { body: { url } });
    expect(created.response.status).toBe(201);
    const { id, secret } = created.data!;
    expect((await api.POST("/webhooks/{id}/test", { params: { path: { id } } })).response.status).toBe(202);

    const admin = client(await adminToken()).api;
    const observation = {
      sku: "CLIENT-HOOK",
      name: "Hook kettle",
      competitor: { id: "cmp_hook", name: "Hook Shop" },
      currency: "USD" as const,
      in_stock: true,
    };
    for (const price of ["30.00", "27.00"]) {
      expect((await admin.POST("/admin/observations", { body: { observations: [{ ...observation, price }] } })).response.status).toBe(200);
    }

    await settled(() => expect(receiver.to(url)).toHaveLength(2), 50);
    const events = receiver.to(url).map((request) => verifyWebhook(secret, request.body, request.headers));
    const byType = Object.fromEntries(events.map((event) => [event.type, event]));
    expect(Object.keys(byType).sort()).toEqual(["price.changed", "webhook.test"]);
    const change = byType["price.changed"]!;
    if (change.type !== "price.changed") throw new Error("narrowing");
    expect(change.data).toMatchObject({ sku: "CLIENT-HOOK", old_price: "30.00", new_price: "27.00", change_pct: -10, direction: "down" });
    for (const event of events) {
      const schema = { "price.changed": "PriceChangedEvent", "stock.changed": "StockChangedEvent", "webhook.test": "TestEvent" }[
        event.type
      ];
      expect(checker.validate(event, `#/components/schemas/${schema}`), JSON.stringify(event)).toEqual([]);
    }

    const [first] = receiver.to(url);
    // A Headers object, or a plain object in any case (Node's req.headers), work alike.
    const capitalised = Object.fromEntries(
      Object.entries(first!.headers).map(([name, value]) => [name.replace(/(^|-)\w/g, (c) => c.toUpperCase()), [value]]),
    );
    expect(verifyWebhook(secret, first!.body, new Headers(first!.headers))).toEqual(verifyWebhook(secret, first!.body, capitalised));
    expect(() => verifyWebhook(secret, first!.body.replace("}", ',"x":1}'), first!.headers)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(`whsec_${btoa("another secret, 24 bytes")}`, first!.body, first!.headers)).toThrow(WebhookVerificationError);
  });
});
