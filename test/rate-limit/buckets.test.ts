import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { generateApiKey, hashApiKey } from "../../src/api-keys/format.ts";
import { buildApp } from "../../src/app.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf, workCounts } from "../helpers/http.ts";
import { captureLogs } from "../helpers/logs.ts";
import { accountToken, adminToken } from "../helpers/tokens.ts";

const KEY_HEADERS = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy", "X-Request-Id"];

function expectBucketHeaders(res: Response, limit: number) {
  for (const name of KEY_HEADERS) expect(res.headers.has(name), `${res.status} lacks ${name}`).toBe(true);
  expect(rateLimitOf(res).limit, `${res.status}`).toBe(limit);
}

describe("malformed API keys", () => {
  const wellFormed = generateApiKey("pda").key;
  const cases: Record<string, string> = {
    "wrong prefix": wellFormed.replace("pda_", "pdx_"),
    "wrong environment": wellFormed.replace("_live_", "_test_"),
    "bad checksum": wellFormed.slice(0, -1) + (wellFormed.endsWith("A") ? "B" : "A"),
    "too short": wellFormed.slice(0, 20),
    "10 kB": `pda_live_${"a".repeat(10_240)}`,
    "non-ASCII": `${wellFormed.slice(0, -3)}é🚀`,
  };

  it.each(Object.entries(cases))("%s: 401 without touching D1 or a key's object", async (_name, key) => {
    const res = await call("GET", "/products", { token: key });
    await expectJson(res, 401);
    expect(res.headers.get("WWW-Authenticate")).toContain('error="invalid_token"');
    // Only the client IP's bucket is asked: no D1 query and no key object.
    expect(workCounts(res)).toEqual({ d1: 0, keyDo: 0, otherDo: 1 });
    expectBucketHeaders(res, 30);
  });

  it("an empty bearer token: 401, same", async () => {
    const res = await call("GET", "/products", { headers: { Authorization: "Bearer " } });
    await expectJson(res, 401);
    expect(workCounts(res)).toEqual({ d1: 0, keyDo: 0, otherDo: 1 });
  });

  it("a well-formed key nobody issued: 401 after one look in D1", async () => {
    const res = await call("GET", "/products", { token: generateApiKey("pda").key });
    const body = await expectJson(res, 401);
    expect(body.detail).toContain("not recognised");
    expectBucketHeaders(res, 30);
  });
});

describe("well-formed keys that match no key", () => {
  afterEach(() => vi.useRealTimers());

  it("cost one D1 read per key hash a minute: the isolate and the key's object remember it as unknown", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    const madeUp = generateApiKey("pda").key;
    const first = await call("GET", "/products", { token: madeUp });
    await expectJson(first, 401);
    // The key's object, which has never read the key ("unchecked"), a look at the IP's bucket, the object again with
    // one lookup, then the 401 counted in the IP's bucket.
    expect(workCounts(first)).toEqual({ d1: 1, keyDo: 2, otherDo: 2 });
    for (let i = 0; i < 3; i++) {
      const again = await call("GET", "/products", { token: madeUp });
      expect((await expectJson(again, 401)).detail).toContain("not recognised");
      expect(workCounts(again)).toEqual({ d1: 0, keyDo: 0, otherDo: 1 });
    }
    // Another isolate would call the object: it too answers from memory within the minute.
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(madeUp)));
    const answer = await stub.admitKey(await hashApiKey(madeUp));
    expect(answer).toEqual({ status: "unknown", work: expect.objectContaining({ d1: 0, doRowsWritten: 0, otherObjectCalls: 0 }) });
    vi.setSystemTime(Date.now() + 60_000);
    expect(workCounts(await call("GET", "/products", { token: madeUp }))).toEqual({ d1: 1, keyDo: 2, otherDo: 2 });
  });

  it("a made-up key's object stores nothing", async () => {
    const madeUp = generateApiKey("pda").key;
    await expectJson(await call("GET", "/products", { token: madeUp }), 401);
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(madeUp)));
    const tables = await runInDurableObject(stub, (_object, state) =>
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\'").toArray(),
    );
    expect(tables).toEqual([]);
  });

  it("a client with many keys loses no IP quota to their first requests", async () => {
    const ip = "192.0.2.92";
    const { token, key } = await freshAccount({ plan: "free" });
    const keys = [key];
    for (let i = 0; i < 30; i++) keys.push((await addKey(token)).key); // 31 keys: more than the IP's 30 a minute
    for (const k of keys) expect((await call("GET", "/competitors", { token: k, headers: { "CF-Connecting-IP": ip } })).status).toBe(200);
    expect(rateLimitOf(await call("GET", "/products", { headers: { "CF-Connecting-IP": ip } })).remaining).toBe(29);
  }, 60_000); // 31 keys made and used one after another: seconds on a loaded machine, so more than the 20 s default

  it("once the client IP's bucket is empty, a key hash not seen yet gets its 429 with no lookup", async () => {
    const ip = "192.0.2.91";
    for (let i = 0; i < 30; i++)
      await expectJson(await call("GET", "/products", { token: generateApiKey("pda").key, headers: { "CF-Connecting-IP": ip } }), 401);
    const res = await call("GET", "/products", { token: generateApiKey("pda").key, headers: { "CF-Connecting-IP": ip } });
    // The client IP's bucket is no plan's: when to retry, and nothing about plans.
    expect(await expectJson(res, 429)).toEqual({
      detail: "Rate limit exceeded: 30 requests per minute.",
      help: `Retry after ${res.headers.get("Retry-After")} s (the Retry-After header).`,
    });
    // The key's object ("unchecked": it reads nothing) and a look at the IP's bucket: no D1.
    expect(workCounts(res)).toEqual({ d1: 0, keyDo: 1, otherDo: 1 });
    expectBucketHeaders(res, 30);
    const next = await call("GET", "/products", { token: generateApiKey("pda").key, headers: { "CF-Connecting-IP": ip } });
    expect(next.status).toBe(429);
    expect(workCounts(next)).toEqual({ d1: 0, keyDo: 0, otherDo: 0 }); // the isolate remembers the IP's refusal
    // A key this isolate has seen goes straight to its own bucket.
    const { key } = await freshAccount({ plan: "free" });
    expect((await call("GET", "/competitors", { token: key })).status).toBe(200);
    const seen = await call("GET", "/competitors", { token: key, headers: { "CF-Connecting-IP": ip } });
    expect(seen.status).toBe(200);
    expect(workCounts(seen)).toEqual({ d1: 0, keyDo: 1, otherDo: 0 });
  });
});

describe("the client IP's bucket", () => {
  const noCredential = (ip: string) => call("GET", "/products", { headers: { "CF-Connecting-IP": ip } });

  it("is one per IPv6 /64, whatever the address's spelling; IPv4-mapped addresses count as their IPv4", async () => {
    for (let i = 0; i < 15; i++) await expectJson(await noCredential(`2001:db8:aa:1::${(i + 1).toString(16)}`), 401);
    for (let i = 0; i < 15; i++) await expectJson(await noCredential(`2001:0db8:00aa:0001:${i.toString(16)}:ffff:1:2`), 401);
    expect((await noCredential("2001:db8:aa:1:ffff:ffff:ffff:ffff")).status).toBe(429);
    expect(rateLimitOf(await noCredential("2001:db8:aa:2::1")).remaining).toBe(29); // the next /64

    for (let i = 0; i < 30; i++) await expectJson(await noCredential("192.0.2.201"), 401);
    expect((await noCredential("::ffff:192.0.2.201")).status).toBe(429);
  });
});

describe("work per request", () => {
  afterEach(() => vi.useRealTimers());

  it("a seen key costs no D1 query and one call to its object", async () => {
    const { key } = await freshAccount({ plan: "standard" });
    // Warm the isolate's catalogue, then hold the clock still so its once-a-second version check stays quiet.
    await call("GET", "/competitors", { token: (await freshAccount({ plan: "standard" })).key });
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    const first = await call("GET", "/competitors", { token: key });
    // Never read by its object yet: the object says so, the client IP's bucket is looked at, then the object reads D1
    // once. Its hand-off of the key's first use to its last-used shard is the mark's own invocation, not the request's.
    expect(workCounts(first)).toEqual({ d1: 1, keyDo: 2, otherDo: 1 });
    for (let i = 0; i < 3; i++) {
      const res = await call("GET", "/competitors", { token: key });
      expect(res.status, await res.clone().text()).toBe(200);
      expect(workCounts(res)).toEqual({ d1: 0, keyDo: 1, otherDo: 0 });
    }
    // An isolate that has not seen the key asks its object first, which decides in that one call: no look at the IP's bucket.
    const keyHash = await hashApiKey(key);
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(keyHash));
    expect(await stub.admitKey(keyHash, { ip: "192.0.2.93", scope: undefined }, { lookUp: false })).toMatchObject({
      status: "active",
      work: { d1: 0 },
    });
  });

  it("a key over its limit is refused by its object every time (no isolate remembers a key's refusal)", async () => {
    const { key } = await freshAccount({ plan: "free" });
    for (let i = 0; i < 10; i++) await call("GET", "/competitors", { token: key });
    for (let i = 0; i < 3; i++) {
      const refused = await call("GET", "/competitors", { token: key });
      await expectJson(refused, 429);
      expect(workCounts(refused)).toEqual({ d1: 0, keyDo: 1, otherDo: 0 });
      expect(rateLimitOf(refused)).toMatchObject({ limit: 10, remaining: 0 });
      expect(rateLimitOf(refused).retryAfter).toBe(rateLimitOf(refused).reset);
    }
  });
});

describe("each request is counted in its bucket", () => {
  it("a JWT on a data route: 401 in the account's bucket", async () => {
    const res = await call("GET", "/products", { token: await accountToken("jwt-on-data") });
    const body = await expectJson(res, 401);
    expect(body.detail).toContain("API key");
    expectBucketHeaders(res, 60);
  });

  it("an API key on /api-keys: 403 in the key's bucket", async () => {
    const { key } = await freshAccount({ plan: "standard" });
    const res = await call("GET", "/api-keys", { token: key });
    await expectJson(res, 403);
    expectBucketHeaders(res, 60);
    expect(rateLimitOf(res).remaining).toBe(59);
  });

  it("an admin JWT on an admin route: the admin subject's bucket", async () => {
    const res = await call("PUT", "/admin/accounts/bucket-admin/plan", { token: await adminToken("admin-b"), body: { plan: "free" } });
    await expectJson(res, 200);
    expectBucketHeaders(res, 600);
  });

  it("an unknown route without a credential: 404 in the client IP's bucket", async () => {
    const res = await call("GET", "/no/such/route");
    await expectJson(res, 404);
    expectBucketHeaders(res, 30);
  });

  it("the client IP's bucket refuses after 30 bad requests", async () => {
    const ip = "192.0.2.77";
    for (let i = 0; i < 30; i++) await expectJson(await call("GET", "/products", { headers: { "CF-Connecting-IP": ip } }), 401);
    const res = await call("GET", "/products", { headers: { "CF-Connecting-IP": ip } });
    expect(await expectJson(res, 429)).toEqual({
      detail: "Rate limit exceeded: 30 requests per minute.",
      help: `Retry after ${res.headers.get("Retry-After")} s (the Retry-After header).`,
    });
  });
});

describe("every status carries the headers", () => {
  it("200, 304, 400, 401, 403, 404, 405, 413", async () => {
    const { key, token } = await freshAccount({ plan: "premium" });
    const ok = await call("GET", "/products", { token: key });
    expect(ok.status).toBe(200);
    const notModified = await call("GET", "/products", { token: key, headers: { "If-None-Match": ok.headers.get("ETag")! } });
    expect(notModified.status).toBe(304);
    const responses = [
      ok,
      notModified,
      await call("POST", "/api-keys", { token, body: { name: "" } }),
      await call("GET", "/api-keys"),
      await call("GET", "/api-keys", { token: key }),
      await call("GET", "/products/prd_missing", { token: key }),
      await call("PUT", "/api-keys", { token }),
      await call("POST", "/api-keys", { token, body: "x".repeat(2 * 1024 * 1024) }),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 304, 400, 401, 403, 404, 405, 413]);
    for (const res of responses) {
      for (const name of KEY_HEADERS) expect(res.headers.has(name), `${res.status} lacks ${name}`).toBe(true);
    }
  });

  it("500: an unexpected failure, and a missing IdP variable named in the detail", async () => {
    const app = buildApp();
    app.get("/explode", () => {
      throw new Error("a bug");
    });
    const ctx = { waitUntil() {}, passThroughOnException() {}, props: {} } as unknown as ExecutionContext;
    const logs = captureLogs();
    const boom = await app.fetch(new Request("https://api.test/explode"), env, ctx);
    expect(logs).toEqual([expect.objectContaining({ level: "error", source: "http", path: "/explode", error: "Error: a bug" })]);
    const body = await expectJson<ApiError>(boom, 500);
    expect(body.detail).not.toContain("a bug");
    expectBucketHeaders(boom, 30);

    const misconfigured = await app.fetch(new Request("https://api.test/account"), { ...env, IDP_JWKS_URL: undefined }, ctx);
    const detail = (await expectJson<ApiError>(misconfigured, 500)).detail;
    expect(detail).toContain("IDP_JWKS_URL");
    expectBucketHeaders(misconfigured, 30);
  });
});
