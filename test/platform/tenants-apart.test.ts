import { env, exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { announceExpiringKeys } from "../../src/account-events/expiring.ts";
import type { DeliveryMessage } from "../../src/events/messages.ts";
import { eventMessageOf } from "../../src/events/outbox.ts";
import { EVENT_METHODS } from "../../src/mcp/events/methods.ts";
import { database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { webhooks } from "../../src/platform/tables.ts";
import { DAY_MS } from "../../src/platform/time.ts";
import { ACCOUNT_BUDGETS } from "../../src/rate-limit/account-budgets.ts";
import { bucketName } from "../../src/rate-limit/buckets.ts";
import { accountBudgets } from "../../src/rate-limit/stub.ts";
import { publishToStreams } from "../../src/stream/publish.ts";
import { withinDeliveryBudgets } from "../../src/webhooks/delivery/budgets.ts";
import { fanOut, fanOutWithSubscriptions } from "../../src/webhooks/delivery/rows.ts";
import { generateWebhookSecret } from "../../src/webhooks/secrets.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { publishSnapshot } from "../helpers/catalogue-factory.ts";
import { authorizeUrl, connect, ORIGIN, openConsent, pkcePair, refresh, registerClient, workerFetch } from "../helpers/connect.ts";
import { storeTodaysRates } from "../helpers/fx-rates.ts";
import { type CallOptions, call, randomTestIp } from "../helpers/http.ts";
import { postMcp } from "../helpers/mcp.ts";
import { fetchDocument, METHODS } from "../helpers/openapi.ts";
import { factSources, sandboxOf } from "../helpers/sandbox.ts";
import { found, report } from "../helpers/secret-scanning.ts";
import { settled } from "../helpers/settle.ts";
import { openStream, readFrames } from "../helpers/stream-frames.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, ingest, runQueue } from "../helpers/webhooks.ts";

/**
 * Tenants apart: account A causes every kind of event (price and stock changes, a leaked key, an expiring key,
 * a disabled webhook, a usage threshold) while account B uses everything a client can reach: every operation of
 * the OpenAPI document, every MCP tool and events method, the stream (live, backfill and its hubs' publish), replay and the webhook fan-out. Nothing B
 * receives may carry A's account id, key ids, key names, key prefixes, webhook ids or URLs or export ids. B also names
 * A's ids wherever a route takes one, and must get nothing of A's back. Both have connected an AI client by OAuth (a
 * connector key each): B's client reads /mcp with its token, B's consent and OAuth exchanges show nothing of A's, and
 * A's connector key id is 404 to B. Both also work in test mode: A changes its
 * sandbox (POST /test/observations, a price no one else sets) while B's test key reads its own sandbox, its feed, its
 * stream and its tools, and B's test webhook is fanned out to: none may show A's sandbox change or its events.
 *
 * The tables below are checked against the document and the MCP server's tool list: a route or tool added later
 * that is not exercised here fails "every operation and every tool is exercised".
 */

const ALL_TYPES = ["price.changed", "stock.changed", "api_key.leaked", "api_key.expiring", "webhook.disabled", "usage.threshold"];
const tag = `${Date.now().toString(36)}${crypto.getRandomValues(new Uint32Array(1))[0]!.toString(36)}`;

interface Tenant {
  sub: string;
  token: string;
  key: string;
  keyId: string;
  webhookId: string;
  webhookUrl: string;
  /** A test key (pda_test_) and a test webhook: the account's sandbox. */
  testKey: string;
  testKeyId: string;
  testWebhookId: string;
  /** An AI client connected by OAuth (one-click connect): its client, connector key and tokens. */
  connector: Awaited<ReturnType<typeof connect>>;
  /** The live key's MCP events subscription (src/mcp/events/) to the tenants' product, and its delivery URL. */
  subscriptionId: string;
  subscriptionUrl: string;
  /** An export of the account's sandbox changes, into the service's bucket. */
  exportId: string;
}

let receiver: Receiver;
let a: Tenant & { markers: string[] };
let b: Tenant;
/** B's consent still waiting for its answer (GET and POST /oauth/consents/{handle}). */
let bConsent: { handle: string; cookie: string };
let productId: string;
/** What B's streams showed while A acted (read in beforeAll, checked in a test of their own). */
const streamed = { live: "", backfill: "", test: "" };
const sku = `TENANTS-${tag}`;
/** The sandbox product both change (one that test_harbor sells, in USD); A's price for it is set by no one else. */
let sandboxSku: string;
const A_SANDBOX_PRICE = "98765.43";
let sandboxProductId: string;

/** Everything that names A: what B must never be shown. */
function markersOf(values: readonly string[]): string[] {
  return values.filter((value) => value.length >= 8);
}

async function tenant(name: string, plan: "premium" | "standard"): Promise<Tenant> {
  const account = await freshAccount({ plan, sub: `tenant-${name}-${tag}` });
  const webhookUrl = hookUrl(`${name}-secret-token-${tag}`);
  const hook = await createWebhook(account.token, { url: webhookUrl, events: ALL_TYPES });
  const test = await call("POST", "/api-keys", { token: account.token, body: { name: `${name}-test-key-${tag}`, environment: "test" } });
  const testKey = await test.json<{ id: string; key: string }>();
  const testHook = await createWebhook(account.token, { url: hookUrl(`${name}-test-secret-token-${tag}`), environment: "test" });
  const connector = await connect(account.token, { clientName: `${name}-connector-${tag}` });
  const subscriptionUrl = hookUrl(`${name}-mcp-secret-token-${tag}`);
  const subscribed = await postMcp(account.key, {
    jsonrpc: "2.0",
    id: 1,
    method: "events/subscribe",
    params: { ...subscription(subscriptionUrl), delivery: { url: subscriptionUrl, secret: generateWebhookSecret() } },
  }).then((res) => res.json<{ result: { id: string } }>());
  const exported = await call("POST", "/exports", {
    token: account.token,
    body: { kind: "changes", format: "ndjson", environment: "test", since: new Date(Date.now() - DAY_MS).toISOString() },
  });
  const { id: exportId } = await exported.json<{ id: string }>();
  return {
    connector,
    sub: account.sub,
    token: account.token,
    key: account.key,
    keyId: account.keyId,
    webhookId: hook.id,
    webhookUrl,
    testKey: testKey.key,
    testKeyId: testKey.id,
    testWebhookId: testHook.id,
    subscriptionId: subscribed.result.id,
    subscriptionUrl,
    exportId,
  };
}

/** Each tenant's MCP subscription: the tenants' product's price changes. */
const subscription = (url: string) => ({ name: "price.changed", arguments: { skus: [sku] }, delivery: { url } });

/** A price change to the account's sandbox product (POST /test/observations, in the sandbox shop's USD). */
const sandboxChange = (testKey: string, price: string) =>
  call("POST", "/test/observations", {
    token: testKey,
    body: {
      observations: [{ sku: sandboxSku, name: "x", competitor: { id: "test_harbor", name: "x" }, price, currency: "USD", in_stock: true }],
    },
  });

/** What POST /api-keys answers, as far as this test reads it. */
interface CreatedKey {
  id: string;
  name: string;
  prefix: string;
  key: string;
}

/** Fails when `text`, shown to B at `where`, names anything of A's. */
function expectNothingOfA(where: string, text: string, sentByB = "") {
  for (const marker of a.markers) {
    if (sentByB.includes(marker)) continue; // B's own request named it (an id B tried): echoing it back leaks nothing
    expect(text.includes(marker), `${where} shows A's ${marker}:\n${text.slice(0, 2000)}`).toBe(false);
  }
}

beforeAll(async () => {
  receiver = installReceiver();
  a = { ...(await tenant("a", "premium")), markers: [] };
  b = await tenant("b", "premium");
  await storeTodaysRates(); // B's conversions (?currency=EUR, JPY) convert rather than refuse

  // A's account events: a leaked key, a key about to expire, a webhook disabled by a 410, a usage threshold.
  const leaked = await call("POST", "/api-keys", { token: a.token, body: { name: `a-leaked-${tag}` } }).then((r) => r.json<CreatedKey>());
  const expiring = await call("POST", "/api-keys", {
    token: a.token,
    body: { name: `a-expiring-${tag}`, expires_at: new Date(Date.now() + 3 * DAY_MS).toISOString() },
  }).then((r) => r.json<CreatedKey>());
  const goneUrl = hookUrl(`a-gone-secret-token-${tag}`);
  const gone = await createWebhook(a.token, { url: goneUrl, events: ["price.changed"] });
  receiver.respond(goneUrl, () => new Response("gone", { status: 410 }));
  a.markers = markersOf([
    a.sub,
    a.exportId,
    a.keyId,
    a.key.slice(0, 17),
    a.webhookId,
    a.webhookUrl,
    leaked.id,
    leaked.name,
    leaked.prefix,
    expiring.id,
    expiring.name,
    expiring.prefix,
    gone.id,
    goneUrl,
    a.testKeyId,
    a.testKey.slice(0, 17),
    a.testWebhookId,
    a.subscriptionId,
    a.subscriptionUrl,
    A_SANDBOX_PRICE,
    a.connector.keyId,
    `a-connector-${tag}`,
    a.connector.clientId,
    a.connector.tokens.access_token,
    a.connector.tokens.refresh_token,
  ]);
  bConsent = await openConsent(authorizeUrl(await registerClient(`b-pending-${tag}`), (await pkcePair()).challenge));

  // B is listening before A acts: the stream's live phase is what must keep A's events home.
  const live = readFrames(await openStream(b.key));
  const testStream = readFrames(await openStream(b.testKey));
  const sold = await call("GET", "/products?competitor=test_harbor", { token: b.testKey }).then((r) =>
    r.json<{ products: { id: string; sku: string }[] }>(),
  );
  [sandboxSku, sandboxProductId] = [sold.products[0]!.sku, sold.products[0]!.id];
  // A changes its sandbox; the events it makes are A's alone.
  expect((await sandboxChange(a.testKey, A_SANDBOX_PRICE)).status).toBe(200);
  a.markers.push(...(await sandboxOf(a.sub).events({ limit: 100 })).map((row) => row.id));
  const since = new Date(Date.now() - 1000).toISOString();

  await ingest([{ sku, price: "20.00", in_stock: true }]);
  await publishSnapshot(); // the product is in the snapshot, so B's reads below find it (not a 503 or a 404)
  const listed = await call("GET", `/products?sku=${sku}`, { token: a.key });
  expect(listed.status).toBe(200);
  productId = (await listed.json<{ products: { id: string }[] }>()).products[0]!.id;
  await ingest([{ sku, price: "18.00", in_stock: false }]);
  expect((await report([found(leaked.key)])).status).toBe(200);
  await announceExpiringKeys(database(env.DB), env.WEBHOOK_QUEUE, Date.now());
  await runQueue([deliveryTo(gone.id)]);
  const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await sha256(a.key)));
  await call("GET", "/competitors", { token: a.key });
  await stub.setLimits({ per_minute: 1000, per_hour: 1000, per_day: 10 });
  for (let i = 2; i <= 8; i++) await call("GET", "/competitors", { token: a.key }); // 80 % of a day of 10: usage.threshold
  await settled(async () => {
    const types = (await env.DB.prepare("SELECT DISTINCT type FROM events WHERE account_id = ?").bind(a.sub).all<{ type: string }>())
      .results;
    expect(types.map((t) => t.type).sort()).toEqual(["api_key.expiring", "api_key.leaked", "usage.threshold", "webhook.disabled"]);
  });

  // A sentinel price change after all of A's events: once B's stream shows it, it has passed every event before it.
  await ingest([{ sku, price: "17.00", in_stock: true }]);
  await live.until('"new_price":"17.00"');
  await live.close();
  streamed.live = live.text();
  // B's own sandbox change, after A's: once B's test stream shows it, A's went past (same publish path, one hub per account).
  expect((await sandboxChange(b.testKey, "12.34")).status).toBe(200);
  await testStream.until('"new_price":"12.34"');
  await testStream.close();
  streamed.test = testStream.text();

  const backfill = readFrames(await openStream(b.key, `?since=${encodeURIComponent(since)}`));
  await backfill.until('"new_price":"17.00"');
  await backfill.close();
  streamed.backfill = backfill.text();
  await publishSnapshot();
}, 120_000);

afterAll(() => {
  receiver.assertNoStrayRequests();
  vi.restoreAllMocks();
});

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** B's call of an operation; `sent` is what B itself put in the request (A's ids it tries). */
type Exercise = () => Promise<{ res: Response; sent?: string }>;
const as = (token: () => string, method: string, path: () => string, body?: unknown, headers?: Record<string, string>): Exercise => {
  return async () => {
    const options: CallOptions = { token: token(), body, headers };
    const url = path();
    return { res: await call(method, url, options), sent: `${url} ${JSON.stringify(body ?? "")}` };
  };
};
const login = () => b.token;
const key = () => b.key;
const testKey = () => b.testKey;

/**
 * Every operation of the document, as B calls it; where a route takes an id, B tries A's (and gets a 404) and
 * then its own.
 */
const OPERATIONS: Record<string, Exercise[]> = {
  "GET /products": [
    as(key, "GET", () => "/products"),
    as(key, "GET", () => `/products?sku=${sku}`),
    as(key, "GET", () => `/products?sku=${sku}&currency=EUR`),
    as(testKey, "GET", () => "/products"),
    as(testKey, "GET", () => `/products?sku=${sandboxSku}`),
    as(testKey, "GET", () => `/products?sku=${sandboxSku}&currency=EUR`),
  ],
  "GET /products/{id}": [
    as(key, "GET", () => `/products/${productId}`),
    as(key, "GET", () => `/products/${productId}?currency=JPY`),
    as(testKey, "GET", () => `/products/${sandboxProductId}`),
    as(testKey, "GET", () => `/products/${sandboxProductId}?currency=JPY`),
  ],
  "GET /products/{id}/history": [
    as(key, "GET", () => `/products/${productId}/history`),
    as(testKey, "GET", () => `/products/${sandboxProductId}/history`),
  ],
  "GET /competitors": [as(key, "GET", () => "/competitors"), as(testKey, "GET", () => "/competitors")],
  "GET /fx-rates": [as(key, "GET", () => "/fx-rates"), as(testKey, "GET", () => "/fx-rates")],
  "GET /events/stream": [], // read in beforeAll, live, backfill and test mode
  "GET /events": [
    as(key, "GET", () => "/events?limit=1000"),
    as(key, "GET", () => "/events?limit=1000&type=stock.changed"),
    as(testKey, "GET", () => "/events?limit=1000"),
  ],
  // B's sandbox price again (no change, so no event the checks below would count twice).
  "POST /test/observations": [async () => ({ res: await sandboxChange(b.testKey, "12.34") })],
  "GET /account/events": [as(login, "GET", () => "/account/events?limit=1000")],
  "GET /account": [as(login, "GET", () => "/account")],
  "GET /account/usage": [
    as(login, "GET", () => "/account/usage?granularity=day"),
    as(login, "GET", () => "/account/usage?granularity=day&environment=test"),
  ],
  "GET /api-keys": [as(login, "GET", () => "/api-keys")],
  "POST /api-keys": [as(login, "POST", () => "/api-keys", { name: "b's second key" })],
  "POST /api-keys/{id}/rotate": [as(login, "POST", () => `/api-keys/${a.keyId}/rotate`, { grace_seconds: 60 })],
  "GET /api-keys/{id}/usage": [
    as(login, "GET", () => `/api-keys/${a.keyId}/usage`),
    as(login, "GET", () => `/api-keys/${a.connector.keyId}/usage`),
    as(login, "GET", () => `/api-keys/${b.keyId}/usage`),
  ],
  "DELETE /api-keys/{id}": [as(login, "DELETE", () => `/api-keys/${a.keyId}`), as(login, "DELETE", () => `/api-keys/${a.connector.keyId}`)],
  "PATCH /api-keys/{id}": [as(login, "PATCH", () => `/api-keys/${a.keyId}`, { name: "taken" })],
  // B's own consent (a consent is answered only from the browser that opened it: its handle is bound by a cookie).
  "GET /oauth/consents/{handle}": [as(login, "GET", () => `/oauth/consents/${encodeURIComponent(bConsent.handle)}`)],
  "POST /oauth/consents/{handle}": [
    async () => {
      const url = `/oauth/consents/${encodeURIComponent(bConsent.handle)}`;
      return { res: await call("POST", url, { token: b.token, body: { allow: false }, headers: { Cookie: bConsent.cookie } }), sent: url };
    },
  ],
  "GET /webhooks": [as(login, "GET", () => "/webhooks")],
  "POST /webhooks": [as(login, "POST", () => "/webhooks", { url: hookUrl("b-second") })],
  "GET /webhooks/{id}": [as(login, "GET", () => `/webhooks/${a.webhookId}`), as(login, "GET", () => `/webhooks/${b.webhookId}`)],
  "DELETE /webhooks/{id}": [as(login, "DELETE", () => `/webhooks/${a.webhookId}`)],
  "PATCH /webhooks/{id}": [as(login, "PATCH", () => `/webhooks/${a.webhookId}`, { description: "taken" })],
  "POST /webhooks/{id}/test": [as(login, "POST", () => `/webhooks/${a.webhookId}/test`)],
  "POST /webhooks/{id}/rotate-secret": [as(login, "POST", () => `/webhooks/${a.webhookId}/rotate-secret`, {})],
  "POST /webhooks/{id}/replay": [
    as(login, "POST", () => `/webhooks/${a.webhookId}/replay`, { since: new Date(Date.now() - DAY_MS).toISOString() }),
    as(login, "POST", () => `/webhooks/${b.webhookId}/replay`, { since: new Date(Date.now() - DAY_MS).toISOString() }),
  ],
  "GET /webhooks/{id}/deliveries": [
    as(login, "GET", () => `/webhooks/${a.webhookId}/deliveries`),
    as(login, "GET", () => `/webhooks/${b.webhookId}/deliveries`),
  ],
  "GET /exports": [as(login, "GET", () => "/exports")],
  "POST /exports": [as(login, "POST", () => "/exports", { kind: "catalogue", format: "ndjson", environment: "test" })],
  "GET /exports/{id}": [as(login, "GET", () => `/exports/${a.exportId}`), as(login, "GET", () => `/exports/${b.exportId}`)],
  // Admin and secret-scanning routes: B holds neither scope nor GitHub's key, with a login or a key.
  "PUT /admin/accounts/{id}/plan": [as(login, "PUT", () => `/admin/accounts/${a.sub}/plan`, { plan: "free" })],
  "POST /admin/observations": [as(key, "POST", () => "/admin/observations", { observations: [] })],
  "PATCH /admin/competitors/{id}": [as(login, "PATCH", () => "/admin/competitors/cmp_amazon", { name: "x" })],
  "PUT /admin/fx-rates": [as(key, "PUT", () => "/admin/fx-rates", { base: "EUR", date: "2026-11-27", rates: { USD: "1.08" } })],
  "POST /secret-scanning/github": [as(key, "POST", () => "/secret-scanning/github", [])],
};

/** Each MCP tool's calls, about a product the key's data holds (its live one, or the sandbox one A changed in its own sandbox). */
const mcpCalls = (product: { sku: string; id: string }): Record<string, Record<string, unknown>[]> => ({
  search_products: [{ query: "Product" }, { sku: product.sku }, { sku: product.sku, currency: "EUR" }],
  get_product: [{ sku: product.sku }, { sku: product.sku, currency: "EUR" }],
  price_history: [{ product_id: product.id }],
  list_competitors: [{}],
  recent_changes: [{ limit: 100 }],
});

/**
 * Each MCP events method's calls (src/mcp/events/methods.ts), made with B's live key and its test key: `error` marks a call
 * that must be refused (it names A's subscription: A's URL and arguments).
 */
const mcpEventCalls = (firstEvent: string): Record<string, { params: Record<string, unknown>; error?: number }[]> => ({
  "events/list": [{ params: {} }],
  "events/poll": [
    { params: { name: "price.changed", arguments: {}, cursor: null } },
    { params: { name: "price.changed", arguments: {}, cursor: firstEvent, maxEvents: 1000 } },
    { params: { name: "stock.changed", arguments: { skus: [sku] }, cursor: firstEvent } },
  ],
  "events/subscribe": [
    { params: { ...subscription(b.subscriptionUrl), delivery: { url: b.subscriptionUrl, secret: generateWebhookSecret() } } },
  ],
  "events/unsubscribe": [{ params: subscription(a.subscriptionUrl), error: -32011 }],
});

/** The routes B cannot call with its credentials: an admin's, and GitHub's signed reports. */
const ROUTES_B_CANNOT_CALL = /^[A-Z]+ \/(admin|secret-scanning)\//;

describe("tenants apart", () => {
  it("every operation and every tool is exercised", async () => {
    const doc = await fetchDocument();
    const documented = Object.entries<Record<string, unknown>>(doc.paths).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(Object.keys(OPERATIONS).sort()).toEqual(documented.sort());
    const tools = await mcpClient(b.key).then(async (client) => (await client.listTools()).tools.map((tool) => tool.name));
    expect(Object.keys(mcpCalls({ sku, id: productId })).sort()).toEqual(tools.sort());
    expect(Object.keys(mcpEventCalls("")).sort()).toEqual(Object.keys(EVENT_METHODS).sort());
  });

  it("B's responses on every route carry nothing of A's, and A's ids get B a 404", async () => {
    for (const [operation, exercises] of Object.entries(OPERATIONS)) {
      for (const exercise of exercises) {
        const { res, sent = "" } = await exercise();
        const text = await res.text();
        expect(res.status, `${operation}: ${text}`).toBeLessThan(500);
        if ([a.keyId, a.webhookId, a.connector.keyId, a.exportId].some((id) => sent.includes(id)))
          expect(res.status, `${operation} with A's id: ${text}`).toBe(404);
        // B's call of its own succeeds, so what it reads is a real answer, not an error (but for the routes B holds no credential for).
        else if (!ROUTES_B_CANNOT_CALL.test(operation)) expect(res.status, `${operation}: ${text}`).toBeLessThan(300);
        expectNothingOfA(operation, `${[...res.headers].map(([n, v]) => `${n}: ${v}`).join("\n")}\n${text}`, sent);
      }
    }
  });

  it("B's streams, live and backfill, carry A's price changes but nothing else of A's; B's test stream, only B's sandbox", () => {
    for (const text of [streamed.live, streamed.backfill]) expect(text).toContain('"new_price":"18.00"');
    expectNothingOfA("GET /events/stream (live)", streamed.live);
    expectNothingOfA("GET /events/stream?since= (backfill)", streamed.backfill);
    expectNothingOfA("GET /events/stream (test key)", streamed.test);
    expect(streamed.test).not.toContain('"new_price":"18.00"');
  });

  it("B's test key reads B's sandbox: A's sandbox change is not in it, and B's own is", async () => {
    const product = await call("GET", `/products/${sandboxProductId}`, { token: b.testKey }).then((r) =>
      r.json<{ offers: { competitor_id: string; price: string }[] }>(),
    );
    expect(product.offers.find((offer) => offer.competitor_id === "test_harbor")!.price).toBe("12.34");
    expectNothingOfA("B's sandbox product", JSON.stringify(product));
  });

  it("the stream hubs' publish (an ingestion's background path), given every event of the day with A's account events, sends B's stream nothing else of A's", async () => {
    const stream = readFrames(await openStream(b.key));
    try {
      await stream.until(": connected");
      const rows = await env.DB.prepare("SELECT * FROM events WHERE timestamp >= ? ORDER BY seq")
        .bind(new Date(Date.now() - DAY_MS).toISOString())
        .all<Record<string, unknown>>();
      expect(rows.results.some((row) => row.account_id === a.sub)).toBe(true);
      await publishToStreams(
        env,
        rows.results.map((row) => eventMessageOf({ ...row, accountId: row.account_id } as never)),
        new WorkMeter(),
      );
      await stream.until('"new_price":"17.00"');
      expectNothingOfA("the stream hubs' publish to B's stream", stream.text());
      for (const type of ALL_TYPES.slice(2)) expect(stream.text()).not.toContain(`event: ${type}`);
    } finally {
      await stream.close();
    }
  });

  it("B's OAuth exchanges (metadata, registration, authorisation, refresh) carry nothing of A's; A's refresh token is not B's client's", async () => {
    const exchanges: [string, Response][] = [
      ["protected resource metadata", await workerFetch(`${ORIGIN}/.well-known/oauth-protected-resource`)],
      ["authorisation server metadata", await workerFetch(`${ORIGIN}/.well-known/oauth-authorization-server`)],
      ["B's refresh", await refresh(b.connector.clientId, b.connector.tokens.refresh_token)],
      ["/mcp refusing B's client", await workerFetch(`${ORIGIN}/mcp`, { method: "POST", body: "{}" })],
    ];
    const clientId = await registerClient(`b-another-${tag}`);
    exchanges.push([
      "B's authorisation request",
      await workerFetch(authorizeUrl(clientId, (await pkcePair()).challenge), { redirect: "manual" }),
    ]);
    for (const [where, res] of exchanges) {
      expect(res.status, where).toBeLessThan(500);
      expectNothingOfA(where, `${[...res.headers].map(([n, v]) => `${n}: ${v}`).join("\n")}\n${await res.text()}`);
    }
    const stolen = await refresh(b.connector.clientId, a.connector.tokens.refresh_token);
    expect(stolen.status).toBe(400);
    expect(await stolen.json()).toMatchObject({ error: "invalid_grant" });
  });

  it("B's MCP tool results carry nothing of A's, with a live key, a connector's OAuth token and a test key", async () => {
    for (const [apiKey, product] of [
      [b.key, { sku, id: productId }],
      [b.connector.tokens.access_token, { sku, id: productId }],
      [b.testKey, { sku: sandboxSku, id: sandboxProductId }],
    ] as const) {
      const client = await mcpClient(apiKey);
      for (const [tool, calls] of Object.entries(mcpCalls(product))) {
        for (const args of calls) {
          const result = await client.callTool({ name: tool, arguments: args });
          // A real answer (not a tool error), so the check below reads data.
          expect(result.isError, `MCP ${tool} ${JSON.stringify(args)}: ${JSON.stringify(result)}`).toBeFalsy();
          expectNothingOfA(`MCP ${tool}`, JSON.stringify(result));
        }
      }
    }
  });

  it("B's MCP events methods answer nothing of A's, with a live key and with a test key; A's subscription cannot be ended by B", async () => {
    const [first] = (
      await env.DB.prepare("SELECT id FROM events WHERE account_id IS NULL AND timestamp >= ? ORDER BY seq LIMIT 1")
        .bind(new Date(Date.now() - DAY_MS).toISOString())
        .all<{ id: string }>()
    ).results;
    for (const apiKey of [b.key, b.testKey]) {
      const client = await mcpClient(apiKey);
      for (const [method, calls] of Object.entries(mcpEventCalls(first!.id))) {
        for (const { params, error } of calls) {
          const where = `MCP ${method} ${JSON.stringify(params)}`;
          const answer = await client.request({ method, params }, z.looseObject({})).then(
            (result) => ({ result }),
            (thrown: unknown) => ({ error: thrown as McpError }),
          );
          if (error === undefined) expect("result" in answer, `${where}: ${JSON.stringify(answer)}`).toBe(true);
          else expect("error" in answer && answer.error.code, where).toBe(error);
          expectNothingOfA(where, JSON.stringify(answer), JSON.stringify(params));
        }
      }
    }
    expect(await env.DB.prepare("SELECT id FROM webhooks WHERE id = ?").bind(a.subscriptionId).first()).toEqual({ id: a.subscriptionId });
  });

  it("B's webhook receives A's price changes but none of A's account events, by fan-out and by replay", async () => {
    const rows = await database(env.DB)
      .$client.prepare("SELECT * FROM events WHERE timestamp >= ? ORDER BY seq")
      .bind(new Date(Date.now() - DAY_MS).toISOString());
    const events = (await rows.all<Record<string, unknown>>()).results;
    // ... and both sandboxes' events, from their accounts' objects.
    const sandboxEvents = async (sub: string) =>
      (await sandboxOf(sub).events({ limit: 100 })).map((row) => ({ ...eventMessageOf(row), sandbox_account_id: sub }));
    const deliveries = await fanOut(factSources(database(env.DB)), [
      ...events.map((row) => eventMessageOf({ ...row, accountId: row.account_id } as never)),
      ...(await sandboxEvents(a.sub)),
      ...(await sandboxEvents(b.sub)),
    ]);
    const toB = deliveries.filter((delivery) => delivery.webhook_id === b.webhookId);
    expect(toB.map((d) => d.event.type)).toContain("price.changed");
    expectNothingOfA("fan-out to B's webhook", JSON.stringify(toB));
    const toBSubscription = deliveries.filter((delivery) => delivery.webhook_id === b.subscriptionId);
    expect(toBSubscription.map((d) => d.event.data.new_price)).toEqual(expect.arrayContaining(["18.00", "17.00"]));
    expectNothingOfA("fan-out to B's MCP subscription", JSON.stringify(toBSubscription));
    const toBTest = deliveries.filter((delivery) => delivery.webhook_id === b.testWebhookId);
    expect(toBTest.map((d) => d.event.data.new_price)).toEqual(["12.34"]); // B's own sandbox change, nothing else
    expectNothingOfA("fan-out to B's test webhook", JSON.stringify(toBTest));

    // B's replay of the last day: what it queues (caught here, not left to the real queue to send after the file) is
    // checked, then delivered along with the fan-out's.
    const replayed: DeliveryMessage[] = [];
    const queued = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockImplementation(async (messages) => {
      replayed.push(...[...messages].map((message) => message.body as DeliveryMessage));
      return {} as QueueSendBatchResponse;
    });
    let replay: Response;
    try {
      replay = await call("POST", `/webhooks/${b.webhookId}/replay`, {
        token: b.token,
        body: { since: new Date(Date.now() - DAY_MS).toISOString() },
      });
    } finally {
      queued.mockRestore();
    }
    expect(replay.status).toBe(202);
    expect(replayed).toHaveLength((await replay.json<{ queued: number }>()).queued);
    expect(replayed.map((message) => message.event.type)).toContain("price.changed");
    expectNothingOfA("B's replay", JSON.stringify(replayed));

    const sentBefore = receiver.to(b.webhookUrl).length;
    await runQueue([...toB, ...replayed]);
    const received = receiver.to(b.webhookUrl);
    expect(received.length - sentBefore).toBe(toB.length + replayed.length);
    for (const request of received) expectNothingOfA("a delivery to B's webhook", request.body);
  });

  it("A's spent subscription-delivery budget holds back A's subscription only: B's subscription gets its deliveries, keeps no gap, and no envelope of A's", async () => {
    const db = database(env.DB);
    const limit = ACCOUNT_BUDGETS["subscription-deliveries"].limit;
    const aBudget = env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName(bucketName("account", a.sub)));
    await aBudget.take("subscription-deliveries", limit, false); // whatever room A had left
    const rows = await db.$client
      .prepare("SELECT * FROM events WHERE timestamp >= ? AND account_id IS NULL ORDER BY seq")
      .bind(new Date(Date.now() - DAY_MS).toISOString())
      .all<Record<string, unknown>>();
    const messages = rows.results.map((row) => eventMessageOf({ ...row, accountId: row.account_id } as never));
    const budgets = accountBudgets(env.RATE_LIMIT_BUCKETS, new WorkMeter());
    try {
      const { admitted } = await withinDeliveryBudgets({ budgets, db }, messages, await fanOutWithSubscriptions(factSources(db), messages));
      const toB = admitted.filter((delivery) => delivery.webhook_id === b.subscriptionId);
      expect(toB.map((delivery) => delivery.event.type)).toContain("price.changed");
      expectNothingOfA("deliveries to B's subscription beside A's spent budget", JSON.stringify(toB));
      expect(admitted.filter((delivery) => delivery.webhook_id === a.subscriptionId)).toEqual([]);
      const gaps = await db
        .select({ id: webhooks.id, gap: webhooks.gapCursor })
        .from(webhooks)
        .where(inArray(webhooks.id, [a.subscriptionId, b.subscriptionId]));
      expect(Object.fromEntries(gaps.map(({ id, gap }) => [id, gap !== null]))).toEqual({
        [a.subscriptionId]: true,
        [b.subscriptionId]: false,
      });
    } finally {
      await db.update(webhooks).set({ gapCursor: null }).where(eq(webhooks.id, a.subscriptionId));
    }
  });
});

async function mcpClient(apiKey: string): Promise<Client> {
  const client = new Client({ name: "tenants-apart", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("https://api.test/mcp"), {
    fetch: async (url, init) => {
      const request = new Request(url, init);
      request.headers.set("CF-Connecting-IP", randomTestIp());
      const res = await exports.default.fetch(request);
      expectNothingOfA("an MCP response", await res.clone().text());
      return res;
    },
    requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
  });
  await client.connect(transport);
  return client;
}
