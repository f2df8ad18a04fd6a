import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildApp } from "../../src/app.ts";
import { MAX_STREAMS_PER_KEY } from "../../src/stream/limits.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { authorizeUrl, openConsent, pkcePair, registerClient } from "../helpers/connect.ts";
import { type CallOptions, call, randomTestIp } from "../helpers/http.ts";
import { bodyText, DocumentChecker, fetchDocument, METHODS } from "../helpers/openapi.ts";
import { found, report } from "../helpers/secret-scanning.ts";
import { settled } from "../helpers/settle.ts";
import { accountToken, adminToken } from "../helpers/tokens.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";

/**
 * The description cannot drift from the code: every operation in GET /openapi.json is called for
 * real, through the worker, for its success and each of its error statuses, and each response is
 * checked against the document (status listed, required headers present and valid, body valid
 * against the schema of the media type it names: each line of an NDJSON body against the schema of
 * one line). The last tests check that every documented status (and each media type of a response
 * with several) was seen (bar 500 and 503, which need a broken server) and that the document and the
 * router list the same routes.
 */

const doc = await fetchDocument();
const checker = new DocumentChecker(doc);
const BIG = JSON.stringify({ name: "x".repeat(1024 * 1024 + 10) });

/** Calls the worker and checks the response against operation `method template`. */
async function expectCall(status: number, method: string, template: string, path: string, options: CallOptions = {}) {
  const res = await call(method, path, options);
  expect(res.status, `${method} ${path}: ${await bodyText(res)}`).toBe(status);
  return checker.check(res, method, template);
}

let receiver: Receiver;
let admin: string;
let key: string;
let keyId: string;
let token: string;
let productId: string;
let etag: string;

beforeAll(async () => {
  receiver = installReceiver();
  admin = await adminToken();
  ({ key, keyId, token } = await freshAccount({ plan: "premium", sub: `openapi-${Date.now()}` }));
  const shop = await createCompetitor({ id: "cmp_openapi", name: "OpenAPI Shop" });
  const product = await createProduct({
    brand: "Acme",
    category: "Kettles",
    gtin: "01234567890128",
    offers: [
      {
        competitor: shop.id,
        price: "24.99",
        regularPrice: "29.99",
        shipping: "4.95",
        previousPrice: "29.99",
        priceChangedAt: "2026-01-02T00:00:00.000Z",
        url: "https://shop.example/k",
      },
    ],
  });
  productId = product.id;
  await addHistory(productId, [
    { competitor: shop.id, price: "29.99", observedAt: "2026-01-01T00:00:00.000Z" },
    { competitor: shop.id, price: "24.99", inStock: false, observedAt: "2026-01-02T00:00:00.000Z" },
  ]);
  await publishSnapshot();
});

afterAll(() => {
  receiver.assertNoStrayRequests();
  vi.restoreAllMocks();
});

describe("catalogue (API key)", () => {
  it("GET /products: 200 with an ETag, 304 for it, 400 for an unknown parameter, 401 without a key", async () => {
    const res = await call("GET", "/products", { token: key });
    const body = await checker.check(res, "get", "/products");
    expect(body.products.length).toBeGreaterThan(0);
    etag = res.headers.get("ETag")!;
    await expectCall(304, "get", "/products", "/products", { token: key, headers: { "If-None-Match": etag } });
    await expectCall(200, "get", "/products", "/products?brand=acme&updated_since=2025-01-01", { token: key });
    await expectCall(400, "get", "/products", "/products?colour=red", { token: key });
    await expectCall(401, "get", "/products", "/products");
  });

  it("GET /products as NDJSON: each line valid against the document's schema of one line, 304 for its own ETag", async () => {
    const ndjson = { Accept: "application/x-ndjson" };
    const res = await call("GET", "/products", { token: key, headers: ndjson });
    const lines = await checker.check(res, "get", "/products");
    const list = await expectCall(200, "get", "/products", "/products", { token: key });
    expect(lines).toEqual(list.products);
    await expectCall(304, "get", "/products", "/products", {
      token: key,
      headers: { ...ndjson, "If-None-Match": res.headers.get("ETag")! },
    });
    const filtered = await expectCall(200, "get", "/products", "/products?brand=acme", { token: key, headers: ndjson });
    expect(filtered).toHaveLength(1);
    expect(await expectCall(200, "get", "/products", "/products?sku=NOPE", { token: key, headers: ndjson })).toEqual([]);
  });

  it("GET /products/{id}: 200, 304, 400, 404, 401", async () => {
    const path = "/products/{id}";
    const productEtag = (await call("GET", `/products/${productId}`, { token: key })).headers.get("ETag")!;
    await expectCall(200, "get", path, `/products/${productId}`, { token: key });
    await expectCall(304, "get", path, `/products/${productId}`, { token: key, headers: { "If-None-Match": productEtag } });
    await expectCall(400, "get", path, `/products/${productId}?page=2`, { token: key });
    await expectCall(400, "get", path, `/products/${productId}?currency=XXX`, { token: key });
    await expectCall(404, "get", path, "/products/prd_nope", { token: key });
    await expectCall(401, "get", path, `/products/${productId}`, { token: await accountToken("jwt-on-data") });
  });

  it("GET /products/{id}/history: 200, 400, 404, 401", async () => {
    const path = "/products/{id}/history";
    const body = await expectCall(200, "get", path, `/products/${productId}/history?from=2026-01-01`, { token: key });
    expect(body.history).toHaveLength(2);
    await expectCall(400, "get", path, `/products/${productId}/history?from=2026-02-01&to=2026-01-01`, { token: key });
    await expectCall(404, "get", path, "/products/prd_nope/history", { token: key });
    await expectCall(401, "get", path, `/products/${productId}/history`, { token: "pda_live_malformed" });
  });

  it("GET /competitors: 200, 304, 400, 401", async () => {
    await expectCall(200, "get", "/competitors", "/competitors", { token: key });
    await expectCall(304, "get", "/competitors", "/competitors", { token: key, headers: { "If-None-Match": etag } });
    await expectCall(400, "get", "/competitors", "/competitors?page=2", { token: key });
    await expectCall(401, "get", "/competitors", "/competitors");
  });

  it("GET /fx-rates: 200, 400, 401", async () => {
    await expectCall(200, "get", "/fx-rates", "/fx-rates", { token: key });
    await expectCall(400, "get", "/fx-rates", "/fx-rates?currency=EUR", { token: key });
    await expectCall(401, "get", "/fx-rates", "/fx-rates");
  });
});

describe("account and keys (account login)", () => {
  it("GET /account: 200, 400, 401, 403", async () => {
    await expectCall(200, "get", "/account", "/account", { token });
    await expectCall(400, "get", "/account", "/account?verbose=1", { token });
    await expectCall(401, "get", "/account", "/account");
    await expectCall(403, "get", "/account", "/account", { token: key });
    const usage = await expectCall(200, "get", "/account/usage", "/account/usage?granularity=day", { token });
    expect(usage.buckets).toHaveLength(365);
    await expectCall(400, "get", "/account/usage", "/account/usage?from=2030-01-02&to=2030-01-01", { token });
    await expectCall(401, "get", "/account/usage", "/account/usage");
    await expectCall(403, "get", "/account/usage", "/account/usage", { token: key });
  });

  it("POST /api-keys: 201, 400, 409, 413, 401, 403", async () => {
    const created = await expectCall(201, "post", "/api-keys", "/api-keys", { token, body: { name: "Production server" } });
    expect(created.key).toMatch(/^pda_live_/);
    await expectCall(400, "post", "/api-keys", "/api-keys", { token, body: { name: "" } });
    await expectCall(413, "post", "/api-keys", "/api-keys", { token, body: BIG });
    await expectCall(401, "post", "/api-keys", "/api-keys", { body: { name: "x" } });
    await expectCall(403, "post", "/api-keys", "/api-keys", { token: key, body: { name: "x" } });

    // 100 active keys, written straight to D1 (the route itself would be rate limited first).
    const full = `openapi-full-${Date.now()}`;
    const fullToken = await accountToken(full);
    await expectCall(200, "get", "/account", "/account", { token: fullToken });
    const insert = env.DB.prepare(
      "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at) VALUES (?, ?, 'seeded', 'pda_live_seeded0', ?, 'active', ?)",
    );
    await env.DB.batch(
      Array.from({ length: 100 }, (_, i) => insert.bind(`key_full${i}_${full}`, full, `hash-${i}-${full}`, new Date().toISOString())),
    );
    await expectCall(409, "post", "/api-keys", "/api-keys", { token: fullToken, body: { name: "one too many" } });
  });

  it("GET and POST /oauth/consents/{handle}: 200, 400, 404, 409, 413, 401, 403", async () => {
    const path = "/oauth/consents/{handle}";
    const pending = async () => openConsent(authorizeUrl(await registerClient("Conformance agent"), (await pkcePair()).challenge));
    const consent = await pending();
    const at = `/oauth/consents/${encodeURIComponent(consent.handle)}`;
    const view = await expectCall(200, "get", path, at, { token });
    expect(view.client_name).toBe("Conformance agent");
    await expectCall(400, "get", path, `${at}?verbose=1`, { token });
    await expectCall(404, "get", path, "/oauth/consents/none-such", { token });
    await expectCall(401, "get", path, at);
    await expectCall(403, "get", path, at, { token: key });
    const bound = { Cookie: consent.cookie };
    await expectCall(400, "post", path, at, { token, headers: bound, body: { allow: "yes" } });
    await expectCall(413, "post", path, at, { token, headers: bound, body: BIG });
    await expectCall(401, "post", path, at, { headers: bound, body: { allow: true } });
    await expectCall(403, "post", path, at, { token: key, headers: bound, body: { allow: true } });
    // From another browser (no binding cookie): 403, the handle still unused.
    await expectCall(403, "post", path, at, { token, body: { allow: true } });
    await expectCall(404, "post", path, "/oauth/consents/none-such", { token, headers: bound, body: { allow: true } });
    const outcome = await expectCall(200, "post", path, at, { token, headers: bound, body: { allow: true, scopes: ["products:read"] } });
    expect(outcome.key_id).toMatch(/^key_/);

    // An account whose 100 keys can all authenticate, written straight to D1: its approval would make a 101st.
    const full = `openapi-connect-full-${Date.now()}`;
    const fullToken = await accountToken(full);
    await expectCall(200, "get", "/account", "/account", { token: fullToken });
    const insert = env.DB.prepare(
      "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at) VALUES (?, ?, 'seeded', 'pda_live_seeded0', ?, 'active', ?)",
    );
    await env.DB.batch(
      Array.from({ length: 100 }, (_, i) => insert.bind(`key_cfull${i}_${full}`, full, `chash-${i}-${full}`, new Date().toISOString())),
    );
    const another = await pending();
    await expectCall(409, "post", path, `/oauth/consents/${encodeURIComponent(another.handle)}`, {
      token: fullToken,
      headers: { Cookie: another.cookie },
      body: { allow: true },
    });
  });

  it("GET /api-keys: 200, 400, 401, 403", async () => {
    const body = await expectCall(200, "get", "/api-keys", "/api-keys", { token });
    await expectCall(400, "get", "/api-keys", "/api-keys?status=active", { token });
    expect(body.api_keys.length).toBeGreaterThan(0);
    await expectCall(401, "get", "/api-keys", "/api-keys", { token: "not a jwt" });
    await expectCall(403, "get", "/api-keys", "/api-keys", { token: key });
  });

  it("PATCH /api-keys/{id}: 200, 400, 404, 413, 401, 403", async () => {
    const path = "/api-keys/{id}";
    await expectCall(200, "patch", path, `/api-keys/${keyId}`, { token, body: { name: "Renamed" } });
    await expectCall(400, "patch", path, `/api-keys/${keyId}`, { token, body: { nmae: "typo" } });
    await expectCall(400, "patch", path, `/api-keys/${keyId}`, { token, body: "not json" });
    await expectCall(404, "patch", path, "/api-keys/key_nope", { token, body: { name: "x" } });
    await expectCall(413, "patch", path, `/api-keys/${keyId}`, { token, body: BIG });
    await expectCall(401, "patch", path, `/api-keys/${keyId}`, { body: { name: "x" } });
    await expectCall(403, "patch", path, `/api-keys/${keyId}`, { token: key, body: { name: "x" } });
  });

  it("DELETE /api-keys/{id}: 200, 400, 404, 401, 403", async () => {
    const path = "/api-keys/{id}";
    const other = await expectCall(201, "post", "/api-keys", "/api-keys", { token, body: { name: "to revoke" } });
    await expectCall(400, "delete", path, `/api-keys/${other.id}?force=true`, { token });
    await expectCall(403, "delete", path, `/api-keys/${other.id}`, { token: key });
    const revoked = await expectCall(200, "delete", path, `/api-keys/${other.id}`, { token });
    expect(revoked.status).toBe("revoked");
    await expectCall(200, "delete", path, `/api-keys/${other.id}`, { token });
    await expectCall(404, "delete", path, "/api-keys/key_nope", { token });
    await expectCall(401, "delete", path, `/api-keys/${other.id}`);
  });

  it("POST /api-keys/{id}/rotate: 201, 400, 404, 409, 413, 401, 403", async () => {
    const path = "/api-keys/{id}/rotate";
    const old = await expectCall(201, "post", "/api-keys", "/api-keys", {
      token,
      body: { name: "to rotate", expires_at: new Date(Date.now() + 86_400_000).toISOString() },
    });
    await expectCall(400, "post", path, `/api-keys/${old.id}/rotate`, { token, body: { grace_seconds: 604_801 } });
    await expectCall(413, "post", path, `/api-keys/${old.id}/rotate`, { token, body: BIG });
    await expectCall(401, "post", path, `/api-keys/${old.id}/rotate`);
    await expectCall(403, "post", path, `/api-keys/${old.id}/rotate`, { token: key });
    await expectCall(404, "post", path, "/api-keys/key_nope/rotate", { token });
    const successor = await expectCall(201, "post", path, `/api-keys/${old.id}/rotate`, { token, body: { grace_seconds: 60 } });
    expect(successor.rotated_from).toBe(old.id);
    await expectCall(409, "post", path, `/api-keys/${old.id}/rotate`, { token });
  });

  it("GET /api-keys/{id}/usage: 200, 400, 404, 401, 403", async () => {
    const path = "/api-keys/{id}/usage";
    const body = await expectCall(200, "get", path, `/api-keys/${keyId}/usage?granularity=hour`, { token });
    expect(body.buckets).toHaveLength(720);
    await expectCall(400, "get", path, `/api-keys/${keyId}/usage?granularity=week`, { token });
    await expectCall(404, "get", path, "/api-keys/key_nope/usage", { token });
    await expectCall(401, "get", path, `/api-keys/${keyId}/usage`);
    await expectCall(403, "get", path, `/api-keys/${keyId}/usage`, { token: key });
  });
});

describe("admin (scoped JWT)", () => {
  it("PUT /admin/accounts/{id}/plan: 200, 400, 413, 401, 403", async () => {
    const path = "/admin/accounts/{id}/plan";
    const body = await expectCall(200, "put", path, "/admin/accounts/openapi-plan/plan", { token: admin, body: { plan: "standard" } });
    expect(body.limits.per_minute).toBe(60);
    await expectCall(400, "put", path, "/admin/accounts/openapi-plan/plan", { token: admin, body: { plan: "gold" } });
    await expectCall(400, "put", path, `/admin/accounts/${"a".repeat(256)}/plan`, { token: admin, body: { plan: "free" } });
    await expectCall(413, "put", path, "/admin/accounts/openapi-plan/plan", { token: admin, body: BIG });
    await expectCall(401, "put", path, "/admin/accounts/openapi-plan/plan", { body: { plan: "free" } });
    await expectCall(403, "put", path, "/admin/accounts/openapi-plan/plan", {
      token: await adminToken("ingester", "prices:write"),
      body: { plan: "free" },
    });
  });

  it("POST /admin/observations: 200, 400, 413, 401, 403", async () => {
    const path = "/admin/observations";
    const observation = {
      sku: "OPENAPI-1",
      name: "Doc kettle",
      competitor: { id: "cmp_openapi", name: "OpenAPI Shop" },
      price: "19.99",
      currency: "USD",
      in_stock: true,
    };
    const body = await expectCall(200, "post", path, path, { token: admin, body: { observations: [observation] } });
    expect(body.received).toBe(1);
    await expectCall(400, "post", path, path, { token: admin, body: { observations: [{ ...observation, price: 19.99 }] } });
    await expectCall(413, "post", path, path, { token: admin, body: BIG });
    await expectCall(401, "post", path, path, { body: { observations: [observation] } });
    await expectCall(403, "post", path, path, {
      token: await adminToken("planner", "accounts:write"),
      body: { observations: [observation] },
    });
  });

  it("PATCH /admin/competitors/{id}: 200, 400, 404, 413, 401, 403", async () => {
    const path = "/admin/competitors/{id}";
    await expectCall(200, "post", "/admin/observations", "/admin/observations", {
      token: admin,
      body: {
        observations: [
          {
            sku: "OPENAPI-2",
            name: "Doc mug",
            competitor: { id: "cmp_openapi_patch", name: "Patch Shop" },
            price: "9.99",
            currency: "USD",
            in_stock: true,
          },
        ],
      },
    });
    const url = "/admin/competitors/cmp_openapi_patch";
    const body = await expectCall(200, "patch", path, url, { token: admin, body: { name: "Patched Shop" } });
    expect(body.name).toBe("Patched Shop");
    await expectCall(400, "patch", path, url, { token: admin, body: {} });
    await expectCall(404, "patch", path, "/admin/competitors/cmp_nobody", { token: admin, body: { name: "X" } });
    await expectCall(413, "patch", path, url, { token: admin, body: BIG });
    await expectCall(401, "patch", path, url, { body: { name: "X" } });
    await expectCall(403, "patch", path, url, { token: await adminToken("planner", "accounts:write"), body: { name: "X" } });
  });

  it("PUT /admin/fx-rates: 200, 400, 413, 401, 403; then ?currency= reads with converted offers", async () => {
    const path = "/admin/fx-rates";
    const rates = { base: "EUR", date: new Date().toISOString().slice(0, 10), rates: { USD: "1.0832", JPY: "162.45" } };
    expect(await expectCall(200, "put", path, path, { token: admin, body: rates })).toMatchObject(rates);
    await expectCall(400, "put", path, path, { token: admin, body: { ...rates, rates: { USD: 1.08 } } });
    await expectCall(413, "put", path, path, { token: admin, body: BIG });
    await expectCall(401, "put", path, path, { body: rates });
    await expectCall(403, "put", path, path, { token: await adminToken("planner", "accounts:write"), body: rates });
    const product = await expectCall(200, "get", "/products/{id}", `/products/${productId}?currency=JPY`, { token: key });
    expect(product.offers[0]!.converted).toMatchObject({ currency: "JPY", rate_date: rates.date });
    const list = await expectCall(200, "get", "/products", "/products?currency=EUR", { token: key });
    expect(list.products.every((p: { summary: { currency: string | null } }) => p.summary.currency === "EUR")).toBe(true);
  });
});

describe("POST /test/observations (a test key)", () => {
  it("200, 400, 413, 401, 403 (a live key)", async () => {
    const path = "/test/observations";
    const testKey = (await expectCall(201, "post", "/api-keys", "/api-keys", { token, body: { name: "doc sandbox", environment: "test" } }))
      .key as string;
    const observation = {
      sku: "TEST-CF-0001",
      name: "Doc espresso machine",
      competitor: { id: "test_harbor", name: "Harbor Outlet" },
      price: "499.00",
      currency: "USD",
      in_stock: true,
    };
    const body = await expectCall(200, "post", path, path, { token: testKey, body: { observations: [observation] } });
    expect(body.received).toBe(1);
    await expectCall(400, "post", path, path, { token: testKey, body: { observations: [{ ...observation, sku: "OPENAPI-1" }] } });
    await expectCall(413, "post", path, path, { token: testKey, body: BIG });
    await expectCall(401, "post", path, path, { body: { observations: [observation] } });
    await expectCall(403, "post", path, path, { token: key, body: { observations: [observation] } });
  });
});

describe("GET /events (API key)", () => {
  it("200, 400, 410, 401", async () => {
    const page = await expectCall(200, "get", "/events", "/events?type=price.changed&type=stock.changed&limit=5", { token: key });
    expect(page.events).toEqual(expect.any(Array));
    await expectCall(400, "get", "/events", "/events?limit=0", { token: key });
    await expectCall(410, "get", "/events", `/events?after=evt_${"0".repeat(32)}`, { token: key });
    await expectCall(401, "get", "/events", "/events");
  });
});

describe("GET /events/stream (API key)", () => {
  it("400, 410, 401, then 200 (its headers: the body never ends, so it is cancelled) and 429", async () => {
    await expectCall(400, "get", "/events/stream", "/events/stream?new_low_days=0", { token: key });
    await expectCall(410, "get", "/events/stream", `/events/stream?after=evt_${"0".repeat(32)}`, { token: key });
    await expectCall(401, "get", "/events/stream", "/events/stream");
    const open = [];
    for (let i = 0; i < MAX_STREAMS_PER_KEY; i++) {
      const res = await call("GET", "/events/stream?type=price.changed&brands=Acme", { token: key });
      expect(res.status).toBe(200);
      expect(res.headers.get("Content-Type")).toBe("text/event-stream; charset=utf-8");
      open.push(res);
    }
    checker.seen.add("GET /events/stream 200");
    await expectCall(429, "get", "/events/stream", "/events/stream", { token: key });
    for (const res of open) await res.body!.cancel();
  });
});

describe("exports (account login)", () => {
  let owner: string;
  beforeAll(async () => {
    owner = await accountToken(`openapi-exports-${Date.now()}`);
  });

  it("POST /exports: 202, 400, 409, 413, 401, 403", async () => {
    const body = { kind: "changes", format: "ndjson", since: new Date(Date.now() - 60_000).toISOString() };
    const created = await expectCall(202, "post", "/exports", "/exports", { token: owner, body });
    expect(created.id).toMatch(/^exp_/);
    await expectCall(400, "post", "/exports", "/exports", { token: owner, body: { kind: "changes" } });
    await expectCall(413, "post", "/exports", "/exports", { token: owner, body: BIG });
    await expectCall(401, "post", "/exports", "/exports", { body });
    await expectCall(403, "post", "/exports", "/exports", { token: key, body });
    // Three at once at most: a fourth while they run is 409 (a catalogue export of the sandbox each, begun together).
    const busy = await accountToken(`openapi-exports-busy-${Date.now()}`);
    const started = await Promise.all(
      Array.from({ length: 4 }, () => call("POST", "/exports", { token: busy, body: { kind: "catalogue", environment: "test" } })),
    );
    const refused = started.find((res) => res.status === 409);
    expect(refused, "a fourth export at once").toBeDefined();
    await checker.check(refused!, "post", "/exports");
  });

  it("GET /exports and /exports/{id}: 200, 400, 404, 401, 403", async () => {
    const list = await expectCall(200, "get", "/exports", "/exports", { token: owner });
    const id = list.exports[0]!.id;
    await expectCall(400, "get", "/exports", "/exports?status=running", { token: owner });
    await expectCall(401, "get", "/exports", "/exports");
    await expectCall(403, "get", "/exports", "/exports", { token: key });
    const path = "/exports/{id}";
    await expectCall(200, "get", path, `/exports/${id}`, { token: owner });
    await expectCall(400, "get", path, `/exports/${id}?x=1`, { token: owner });
    await expectCall(404, "get", path, "/exports/exp_nope", { token: owner });
    await expectCall(401, "get", path, `/exports/${id}`);
    await expectCall(403, "get", path, `/exports/${id}`, { token: key });
  });
});

describe("webhooks (account login)", () => {
  let hooks: string;
  let webhookId: string;
  beforeAll(async () => {
    hooks = await accountToken(`openapi-hooks-${Date.now()}`);
  });

  it("POST /webhooks: 201, 400, 409, 413, 401, 403", async () => {
    const created = await expectCall(201, "post", "/webhooks", "/webhooks", {
      token: hooks,
      body: { url: hookUrl("openapi"), description: "docs" },
    });
    expect(created.secret).toMatch(/^whsec_/);
    webhookId = created.id;
    await expectCall(400, "post", "/webhooks", "/webhooks", { token: hooks, body: { url: "http://127.0.0.1/" } });
    await expectCall(413, "post", "/webhooks", "/webhooks", { token: hooks, body: BIG });
    await expectCall(401, "post", "/webhooks", "/webhooks", { body: { url: hookUrl() } });
    await expectCall(403, "post", "/webhooks", "/webhooks", { token: key, body: { url: hookUrl() } });
    const full = await accountToken(`openapi-hooks-full-${Date.now()}`);
    for (let i = 0; i < 20; i++) expect((await call("POST", "/webhooks", { token: full, body: { url: hookUrl() } })).status).toBe(201);
    await expectCall(409, "post", "/webhooks", "/webhooks", { token: full, body: { url: hookUrl() } });
  });

  it("GET /webhooks and /webhooks/{id}: 200, 400, 404, 401, 403", async () => {
    const list = await expectCall(200, "get", "/webhooks", "/webhooks", { token: hooks });
    expect(list.webhooks).toHaveLength(1);
    await expectCall(400, "get", "/webhooks", "/webhooks?status=enabled", { token: hooks });
    await expectCall(401, "get", "/webhooks", "/webhooks");
    await expectCall(403, "get", "/webhooks", "/webhooks", { token: key });
    const path = "/webhooks/{id}";
    await expectCall(200, "get", path, `/webhooks/${webhookId}`, { token: hooks });
    await expectCall(400, "get", path, `/webhooks/${webhookId}?x=1`, { token: hooks });
    await expectCall(404, "get", path, "/webhooks/whk_nope", { token: hooks });
    await expectCall(401, "get", path, `/webhooks/${webhookId}`);
    await expectCall(403, "get", path, `/webhooks/${webhookId}`, { token: key });
  });

  it("POST /webhooks/{id}/test and GET …/deliveries: 202 and a recorded delivery, 400, 404, 409, 401, 403", async () => {
    const path = "/webhooks/{id}/test";
    await expectCall(202, "post", path, `/webhooks/${webhookId}/test`, { token: hooks });
    await expectCall(400, "post", path, `/webhooks/${webhookId}/test?type=price.changed`, { token: hooks });
    await expectCall(404, "post", path, "/webhooks/whk_nope/test", { token: hooks });
    await expectCall(401, "post", path, `/webhooks/${webhookId}/test`);
    await expectCall(403, "post", path, `/webhooks/${webhookId}/test`, { token: key });

    // The real queue delivers it; then the attempt is listed (checked against the Delivery schema).
    await settled(
      async () =>
        expect(
          (await env.DB.prepare("SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = ?")
            .bind(webhookId)
            .first<{ n: number }>())!.n,
        ).toBe(1),
      100,
    );
    const deliveries = "/webhooks/{id}/deliveries";
    const body = await expectCall(200, "get", deliveries, `/webhooks/${webhookId}/deliveries`, { token: hooks });
    expect(body.deliveries).toHaveLength(1);
    await expectCall(400, "get", deliveries, `/webhooks/${webhookId}/deliveries?limit=5`, { token: hooks });
    await expectCall(404, "get", deliveries, "/webhooks/whk_nope/deliveries", { token: hooks });
    await expectCall(401, "get", deliveries, `/webhooks/${webhookId}/deliveries`);
    await expectCall(403, "get", deliveries, `/webhooks/${webhookId}/deliveries`, { token: key });

    await env.DB.prepare(
      "UPDATE webhooks SET status = 'disabled', disabled_at = ?, disabled_reason = 'The endpoint answered 410 Gone.' WHERE id = ?",
    )
      .bind(new Date().toISOString(), webhookId)
      .run();
    const disabled = await expectCall(200, "get", "/webhooks/{id}", `/webhooks/${webhookId}`, { token: hooks });
    expect(disabled.status).toBe("disabled");
    await expectCall(409, "post", path, `/webhooks/${webhookId}/test`, { token: hooks });
  });

  it("PATCH /webhooks/{id}, rotate-secret and replay: 200/202, 400, 404, 409, 413, 401, 403", async () => {
    const path = "/webhooks/{id}";
    const at = `/webhooks/${webhookId}`;
    await expectCall(409, "post", `${path}/replay`, `${at}/replay`, { token: hooks, body: { since: "2026-01-01T00:00:00Z" } }); // still disabled
    await expectCall(200, "patch", path, at, { token: hooks, body: { status: "enabled", description: "edited" } });
    await expectCall(400, "patch", path, at, { token: hooks, body: {} });
    await expectCall(404, "patch", path, "/webhooks/whk_nope", { token: hooks, body: { status: "enabled" } });
    await expectCall(413, "patch", path, at, { token: hooks, body: BIG });
    await expectCall(401, "patch", path, at, { body: { status: "enabled" } });
    await expectCall(403, "patch", path, at, { token: key, body: { status: "enabled" } });
    for (const [route, ok, body] of [
      ["rotate-secret", 200, { grace_seconds: 60 }],
      ["replay", 202, { since: "2026-01-01T00:00:00Z" }],
    ] as const) {
      const template = `${path}/${route}`;
      await expectCall(ok, "post", template, `${at}/${route}`, { token: hooks, body });
      await expectCall(400, "post", template, `${at}/${route}`, { token: hooks, body: { unknown: 1 } });
      await expectCall(404, "post", template, `/webhooks/whk_nope/${route}`, { token: hooks, body });
      await expectCall(413, "post", template, `${at}/${route}`, { token: hooks, body: BIG });
      await expectCall(401, "post", template, `${at}/${route}`, { body });
      await expectCall(403, "post", template, `${at}/${route}`, { token: key, body });
    }
    // Concurrent rotations: those that lost the race answer 409.
    const raced = await Promise.all(
      Array.from({ length: 4 }, () => call("POST", `${at}/rotate-secret`, { token: hooks, body: { grace_seconds: 60 } })),
    );
    const lost = raced.find((res) => res.status === 409);
    expect(lost, "no rotation lost the race").toBeDefined();
    await checker.check(lost!, "post", `${path}/rotate-secret`);
  });

  it("DELETE /webhooks/{id}: 204, 400, 404, 401, 403", async () => {
    const path = "/webhooks/{id}";
    await expectCall(400, "delete", path, `/webhooks/${webhookId}?force=true`, { token: hooks });
    await expectCall(403, "delete", path, `/webhooks/${webhookId}`, { token: key });
    await expectCall(401, "delete", path, `/webhooks/${webhookId}`);
    await expectCall(204, "delete", path, `/webhooks/${webhookId}`, { token: hooks });
    await expectCall(404, "delete", path, `/webhooks/${webhookId}`, { token: hooks });
  });
});

describe("GET /account/events (account login)", () => {
  it("200, 400, 410, 401, 403", async () => {
    const page = await expectCall(200, "get", "/account/events", "/account/events?type=api_key.leaked&limit=5", { token });
    expect(page.events).toEqual(expect.any(Array));
    await expectCall(400, "get", "/account/events", "/account/events?type=price.changed", { token });
    await expectCall(410, "get", "/account/events", `/account/events?after=evt_${"0".repeat(32)}`, { token });
    await expectCall(401, "get", "/account/events", "/account/events");
    await expectCall(403, "get", "/account/events", "/account/events", { token: key });
  });
});

describe("key restrictions (API key)", () => {
  it("every data route: 403 outside the key's scopes or allowed addresses", async () => {
    const scoped = async (body: object) =>
      (await expectCall(201, "post", "/api-keys", "/api-keys", { token, body: { name: "restricted", ...body } })).key as string;
    const eventsOnly = await scoped({ scopes: ["events:read"] });
    for (const [template, path] of [
      ["/products", "/products"],
      ["/products/{id}", `/products/${productId}`],
      ["/products/{id}/history", `/products/${productId}/history`],
      ["/competitors", "/competitors"],
      ["/fx-rates", "/fx-rates"],
    ]) {
      await expectCall(403, "get", template!, path!, { token: eventsOnly });
    }
    const productsOnly = await scoped({ scopes: ["products:read"] });
    await expectCall(403, "get", "/events", "/events", { token: productsOnly });
    await expectCall(403, "get", "/events/stream", "/events/stream", { token: productsOnly });
    await expectCall(403, "get", "/products", "/products", {
      token: await scoped({ allowed_ips: ["192.0.2.0/24"] }),
      headers: { "CF-Connecting-IP": "203.0.113.9" },
    });
  });
});

describe("secret scanning (signed by GitHub)", () => {
  const path = "/secret-scanning/github";
  const check = async (status: number, res: Response | Promise<Response>) => {
    const response = await res;
    expect(response.status, await bodyText(response)).toBe(status);
    return checker.check(response, "post", path);
  };

  it("POST /secret-scanning/github: 200, 400, 401, 413", async () => {
    const leaked = await freshAccount();
    expect(await check(200, report([found(leaked.key), found("nope")]))).toMatchObject([
      { label: "true_positive" },
      { label: "false_positive" },
    ]);
    await check(400, report({ not: "an array" }));
    await check(400, report([], { query: "page=2" }));
    await check(401, call("POST", path, { body: [] }));
    await check(413, report(`[${" ".repeat(16 * 1024 * 1024)}]`));
  });
});

describe("every operation", () => {
  it("answers 429 with Retry-After once its bucket is spent (here the client IP's: 30 a minute)", async () => {
    const ip = randomTestIp();
    for (let i = 0; i < 30; i++) expect((await call("GET", "/openapi.json", { headers: { "CF-Connecting-IP": ip } })).status).toBe(200);
    // Secret-scanning reports have a bucket of their own, whoever sends them (tested above).
    for (const [path, item] of Object.entries<Record<string, unknown>>(doc.paths).filter(
      ([path]) => !path.startsWith("/secret-scanning/"),
    )) {
      for (const method of METHODS.filter((m) => item[m])) {
        const concrete = path.replaceAll(/\{[^}]+\}/g, "x_1");
        const body = method === "get" || method === "delete" ? undefined : {};
        await expectCall(429, method, path, concrete, { headers: { "CF-Connecting-IP": ip }, body });
      }
    }
  });

  it("answers 406 to an Accept that admits none of its media types, with the credential it takes, before it runs", async () => {
    const login = await accountToken(`openapi-406-${Date.now()}`);
    const created = await call("POST", "/api-keys", { token: login, body: { name: "406", environment: "test" } });
    const testKey = ((await created.json()) as { key: string }).key;
    const credentials: Record<string, string | undefined> = { AccountLogin: login, AdminJWT: admin, GitHubSignature: undefined };
    for (const [path, item] of Object.entries<Record<string, { responses: object; security: object[] }>>(doc.paths)) {
      for (const method of METHODS.filter((m) => item[m] && "406" in item[m]!.responses)) {
        const [scheme = ""] = Object.keys(item[method]!.security[0] ?? {});
        const credential = scheme === "ApiKey" ? (path.startsWith("/test/") ? testKey : key) : credentials[scheme];
        const concrete = path.replaceAll(/\{[^}]+\}/g, "x_1");
        const body = method === "get" || method === "delete" ? undefined : {};
        await expectCall(406, method, path, concrete, { token: credential, body, headers: { Accept: "text/csv" } });
      }
    }
  });

  it("a data route's 429 for an API key carries the key's own limit (free: 10 a minute)", async () => {
    const free = await freshAccount({ plan: "free" });
    for (let i = 0; i < 10; i++) expect((await call("GET", "/competitors", { token: free.key })).status).toBe(200);
    const res = await call("GET", "/competitors", { token: free.key });
    // What to change: when to retry (Retry-After's seconds), and the plans that allow more.
    expect(await checker.check(res, "get", "/competitors")).toEqual({
      detail: "Rate limit exceeded: 10 requests per minute.", // the contract's words, which clients match
      help: `Retry after ${res.headers.get("Retry-After")} s (the Retry-After header). A larger plan allows more: standard 60 a minute, premium 300 a minute.`,
    });
    expect(res.headers.get("X-RateLimit-Limit")).toBe("10");
  });

  it("answers 405 with Allow naming exactly the document's methods for that path, and 404 for a path it does not have", async () => {
    for (const [path, item] of Object.entries<Record<string, unknown>>(doc.paths)) {
      const documented = METHODS.filter((m) => item[m]).map((m) => m.toUpperCase());
      const unused = ["GET", "PUT", "POST", "DELETE", "PATCH"].find((m) => !documented.includes(m))!;
      const res = await call(unused, path.replaceAll(/\{[^}]+\}/g, "x_1"), { token: key });
      expect(res.status, `${unused} ${path}`).toBe(405);
      await checker.check(res, unused, path, "MethodNotAllowed");
      expect(
        new Set(
          res.headers
            .get("Allow")!
            .split(", ")
            .filter((m) => m !== "HEAD"),
        ),
        path,
      ).toEqual(new Set(documented));
    }
    const res = await call("GET", "/nothing-here", { token: key });
    expect(res.status).toBe(404);
    await checker.check(res, "get", "/nothing-here", "NotFound");
  });
});

describe("after every other call", () => {
  it("POST /secret-scanning/github: 429 for a signed report once its own bucket (600 a minute) is spent, whoever sends it", async () => {
    // Spent in its object directly (600 calls through the worker would be slow); last, as it stays spent for a minute.
    const bucket = env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName("secret-scanning:github"));
    for (let i = 0; i < 600; i++) await bucket.admit({ per_minute: 600, per_hour: 36_000, per_day: 864_000 });
    const res = await report([]);
    expect(res.status, await bodyText(res)).toBe(429);
    await checker.check(res, "post", "/secret-scanning/github");
  }, 60_000); // 600 object calls: seconds on a loaded machine

  it("every documented status was seen (except 500 and 503, which need a broken server or identity provider)", () => {
    const missing = checker.documented().filter((entry) => !/ 50[03]$/.test(entry) && !checker.seen.has(entry));
    expect(missing).toEqual([]);
  });
});

describe("the document and the router", () => {
  it("list the same operations (the index at /, the dashboard, /docs, /openapi.json, OAuth's own endpoints and an export's signed download URL are not API operations)", () => {
    const routed = new Set(
      buildApp()
        .routes.filter(
          (route) =>
            route.method !== "ALL" &&
            !/^\/((dashboard|docs|openapi\.json|\.well-known)(\/|$)|oauth\/(authorize|token|register)$|$)/.test(route.path) &&
            route.path !== "/exports/:id/download",
        )
        .map((route) => `${route.method} ${route.path.replaceAll(/:(\w+)/g, "{$1}")}`),
    );
    const documented = new Set(
      Object.entries<Record<string, unknown>>(doc.paths).flatMap(([path, item]) =>
        METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`),
      ),
    );
    expect([...routed].sort()).toEqual([...documented].sort());
  });

  it("every operation has an operationId, a summary, a tag and a security requirement of a declared scheme", () => {
    const schemes = Object.keys(doc.components.securitySchemes);
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        const op = item[method];
        expect(op.operationId && op.summary && op.tags?.length, `${method} ${path}`).toBeTruthy();
        expect(
          op.security.flatMap((s: object) => Object.keys(s)).every((name: string) => schemes.includes(name)),
          `${method} ${path}`,
        ).toBe(true);
      }
    }
  });
});

describe("the checker itself", () => {
  it("refuses a body, a header or a status the document does not allow", async () => {
    const json = { "Content-Type": "application/json" };
    expect(checker.validate({ products: [{ id: "prd_1" }] }, "#/components/schemas/ProductList")).not.toEqual([]);
    expect(
      checker.validate(
        { id: "a", plan: "free", limits: { per_minute: 1, per_hour: 1, per_day: 1 }, created_at: "yesterday" },
        "#/components/schemas/Account",
      ),
    ).not.toEqual([]);
    expect(checker.validate({ detail: "" }, "#/components/schemas/Error")).not.toEqual([]);
    await expect(checker.check(new Response("{}", { status: 418, headers: json }), "get", "/products")).rejects.toThrow(
      /not a documented response/,
    );
    await expect(checker.check(new Response('{"detail":"x"}', { status: 401, headers: json }), "get", "/products")).rejects.toThrow(
      /required header/,
    );
    const headers = {
      ...json,
      "X-Request-Id": "r",
      "X-RateLimit-Limit": "ten",
      "X-RateLimit-Remaining": "0",
      "X-RateLimit-Reset": "1",
      RateLimit: "x",
      "RateLimit-Policy": "x",
      "WWW-Authenticate": "Bearer",
    };
    await expect(checker.check(new Response('{"detail":"x"}', { status: 401, headers }), "get", "/products")).rejects.toThrow(
      /X-RateLimit-Limit/,
    );
  });

  it("checks the body against the media type the response names, and an NDJSON body line by line", async () => {
    const ok = {
      "X-Request-Id": "r",
      "X-RateLimit-Limit": "1",
      "X-RateLimit-Remaining": "0",
      "X-RateLimit-Reset": "1",
      RateLimit: "x",
      "RateLimit-Policy": "x",
      ETag: '"e"',
      "Cache-Control": "private, no-cache",
    };
    const [product] = (await checker.check(await call("GET", "/products", { token: key }), "get", "/products")).products;
    const line = JSON.stringify(product);
    const ndjson = (body: string) => new Response(body, { status: 200, headers: { ...ok, "Content-Type": "application/x-ndjson" } });
    expect(await checker.check(ndjson(`${line}\n${line}\n`), "get", "/products")).toEqual([product, product]);
    await expect(checker.check(ndjson(`${line}\n{"id":"prd_1"}\n`), "get", "/products")).rejects.toThrow(/line 2/);
    await expect(checker.check(ndjson(line), "get", "/products")).rejects.toThrow(/end with a newline/);
    await expect(
      checker.check(new Response(line, { status: 200, headers: { ...ok, "Content-Type": "text/plain" } }), "get", "/products"),
    ).rejects.toThrow(/not one the document lists/);
  });
});

describe("query parameters", () => {
  it("a parameter given twice is a 400 that says so (the router keeps both values)", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    for (const query of ["brand=a&brand=b", "updated_since=2026-01-01&updated_since=2026-02-01"]) {
      const res = await call("GET", `/products?${query}`, { token: key });
      expect((await checker.check(res, "get", "/products")).detail).toMatch(/^Invalid query: \w+: must be given once$/);
    }
  });
});
