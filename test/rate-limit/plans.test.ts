import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { hashApiKey } from "../../src/api-keys/format.ts";
import type { ApiKeyObject } from "../../src/index.ts";
import { PLAN_LIMITS } from "../../src/rate-limit/plans.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { fakeDateAt } from "../helpers/clock.ts";
import { call, expectJson, rateLimitOf, workCounts } from "../helpers/http.ts";
import { adminToken } from "../helpers/tokens.ts";

// Time is controlled with a fake Date, which the worker and its Durable Objects share in these tests.
const T0 = Date.parse("2030-01-01T00:00:00Z");
fakeDateAt(T0);

const at = (ms: number) => vi.setSystemTime(T0 + ms);
// Any data route will do: admission happens before routing.
const get = (key: string) => call("GET", "/competitors", { token: key });

describe.each(["free", "standard", "premium"] as const)("the %s plan", (plan) => {
  const { per_minute: limit, per_hour, per_day } = PLAN_LIMITS[plan];

  it(`admits ${limit} a minute, counting down, then refuses with every header right`, async () => {
    const { key } = await freshAccount({ plan });
    for (let i = 1; i <= limit; i++) {
      at(i); // one a millisecond
      const res = await get(key);
      expect(res.status, await res.clone().text()).not.toBe(429);
      expect(rateLimitOf(res)).toMatchObject({ limit, remaining: limit - i, reset: 60 });
    }
    at(30_000);
    const refused = await get(key);
    const body = await expectJson(refused, 429);
    // The contract's sentence, and beside it what to change: when to retry and the plans with more (none above premium).
    const more = {
      free: "A larger plan allows more: standard 60 a minute, premium 300 a minute.",
      standard: "A larger plan allows more: premium 300 a minute.",
      premium: "No plan allows more: spread the requests over the minute.",
    }[plan];
    expect(body).toEqual({
      detail: `Rate limit exceeded: ${limit} requests per minute.`,
      help: `Retry after 31 s (the Retry-After header). ${more}`,
    });
    const headers = rateLimitOf(refused);
    // The oldest request (at +1 ms) leaves the window at 60.001 s: 30.001 s from now, rounded up.
    expect(headers).toMatchObject({ limit, remaining: 0, reset: 31, retryAfter: 31 });
    expect(headers.policy).toBe(`"minute";q=${limit};w=60, "hour";q=${per_hour};w=3600, "day";q=${per_day};w=86400`);
    expect(headers.rateLimit).toBe(`"minute";r=0;t=31`);
    expect(refused.headers.get("Content-Type")).toContain("application/json");

    // Once the oldest request has left the window, exactly one more is admitted.
    at(60_001);
    const again = await get(key);
    expect(again.status).not.toBe(429);
    expect(rateLimitOf(again)).toMatchObject({ remaining: 0 });
    expect((await get(key)).status).toBe(429);
  }, 20_000); // Premium: 300 requests one after another
});

describe("counters", () => {
  it("are separate for two keys of one account", async () => {
    const { token, key } = await freshAccount({ plan: "free" });
    const second = await addKey(token);
    for (let i = 0; i < 10; i++) expect((await get(key)).status).not.toBe(429);
    expect((await get(key)).status).toBe(429);
    const other = await get(second.key);
    expect(other.status).not.toBe(429);
    expect(rateLimitOf(other).remaining).toBe(9);
  });

  it.each(["free", "standard"] as const)("admit exactly the limit of 3 × limit concurrent requests (%s)", async (plan) => {
    const { key } = await freshAccount({ plan });
    const limit = PLAN_LIMITS[plan].per_minute;
    expect((await get(key)).status).toBe(200); // seen: later requests go straight to the key's object
    const statuses = (await Promise.all(Array.from({ length: 3 * limit }, () => get(key)))).map((r) => r.status);
    expect(statuses.filter((s) => s !== 429)).toHaveLength(limit - 1);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2 * limit + 1);
  });

  it("survive the eviction of the key's object", async () => {
    const { key } = await freshAccount({ plan: "free" });
    for (let i = 0; i < 6; i++) await get(key);
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));
    await evictDurableObject(stub);
    const res = await get(key);
    // The 4th request reserved a block of 4 (src/api-keys/object/reservations.ts) and the 6th left one unused: the
    // wake counts it as made, so 7 are counted and this is the 8th.
    expect(rateLimitOf(res).remaining).toBe(2);
    // Woken from its own storage: no D1 query.
    expect(workCounts(res)).toMatchObject({ d1: 0, keyDo: 1 });
    for (let i = 0; i < 2; i++) expect((await get(key)).status).toBe(200);
    expect((await get(key)).status).toBe(429);
  });

  it("count only admitted requests: a refusal costs nothing", async () => {
    const { key } = await freshAccount({ plan: "free" });
    for (let i = 0; i < 10; i++) await get(key);
    at(1_000);
    for (let i = 0; i < 20; i++) expect((await get(key)).status).toBe(429);
    at(60_001);
    // Had the refusals counted, the window would still be full.
    const res = await get(key);
    expect(res.status).not.toBe(429);
  });
});

describe("changes pushed to the key's object", () => {
  it("a revoked key is refused with 401 on the very next request", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "free" });
    expect((await get(key)).status).not.toBe(401);
    await expectJson(await call("DELETE", `/api-keys/${keyId}`, { token }), 200);
    const res = await get(key);
    const body = await expectJson(res, 401);
    expect(body.detail).toContain("revoked");
    expect(res.headers.get("WWW-Authenticate")).toContain('error="invalid_token"');
    // Counted in the client IP's bucket, not the key's.
    expect(rateLimitOf(res).limit).toBe(30);
  });

  it("a plan upgrade and downgrade apply to the next request", async () => {
    const { sub, key } = await freshAccount({ plan: "free" });
    for (let i = 0; i < 10; i++) await get(key);
    expect((await get(key)).status).toBe(429);
    const admin = await adminToken();
    await expectJson(await call("PUT", `/admin/accounts/${sub}/plan`, { token: admin, body: { plan: "premium" } }), 200);
    const upgraded = await get(key);
    expect(upgraded.status).not.toBe(429);
    expect(rateLimitOf(upgraded)).toMatchObject({ limit: 300, remaining: 300 - 11 });

    await expectJson(await call("PUT", `/admin/accounts/${sub}/plan`, { token: admin, body: { plan: "standard" } }), 200);
    const downgraded = await get(key);
    expect(rateLimitOf(downgraded)).toMatchObject({ limit: 60, remaining: 60 - 12 });
  });

  it("a downgrade below the current usage refuses until enough requests leave the window", async () => {
    const { sub, key } = await freshAccount({ plan: "premium" });
    for (let i = 0; i < 30; i++) {
      at(i * 1000);
      await get(key);
    }
    await expectJson(await call("PUT", `/admin/accounts/${sub}/plan`, { token: await adminToken(), body: { plan: "free" } }), 200);
    at(30_000);
    const res = await get(key);
    expect(res.status).toBe(429);
    // 30 in the window, limit 10: the 21st oldest (at 20 s) must leave, at 80 s: 50 s from now.
    expect(rateLimitOf(res)).toMatchObject({ limit: 10, remaining: 0, retryAfter: 50, reset: 50 });
  });
});

/**
 * The worker, its objects and these tests share one isolate, so a change made through the worker is also
 * made "in" the isolate that remembers things. Here the change is made as another isolate would make it:
 * D1 written, then the key's object called directly, with nothing of this isolate's memory touched.
 */
describe("changes made through another isolate", () => {
  const objectOf = async (key: string) => env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));

  it("a plan upgrade: the key refused at the old limit is admitted on its next request here", async () => {
    const { sub, key } = await freshAccount({ plan: "free" });
    for (let i = 0; i < 10; i++) await get(key);
    expect((await get(key)).status).toBe(429); // refused here: this isolate has seen the refusal
    await env.DB.prepare("UPDATE accounts SET plan = 'premium' WHERE id = ?").bind(sub).run();
    await (await objectOf(key)).setLimits(PLAN_LIMITS.premium);
    const next = await get(key);
    expect(next.status).toBe(200);
    expect(rateLimitOf(next)).toMatchObject({ limit: 300, remaining: 300 - 11 });
  });

  it("a revocation: the key refused at its limit answers 401 on its next request here, not 429", async () => {
    const { sub, key, keyId } = await freshAccount({ plan: "free" });
    for (let i = 0; i < 10; i++) await get(key);
    expect((await get(key)).status).toBe(429);
    await env.DB.prepare("UPDATE api_keys SET status = 'revoked', revoked_at = ? WHERE id = ?").bind(new Date().toISOString(), keyId).run();
    await (await objectOf(key)).revoke(keyId, sub);
    expect((await expectJson(await get(key), 401)).detail).toContain("revoked");
  });

  it("a plan push that lands while the key's object reads D1 for the first time is not lost", async () => {
    const { key } = await freshAccount({ plan: "free" }); // never used: its object has read nothing yet
    const keyHash = await hashApiKey(key);
    const limits = await runInDurableObject(await objectOf(key), async (object: ApiKeyObject) => {
      const admission = object.admitKey(keyHash); // reads D1 (the free plan, as it stood when the read began)
      const push = object.setLimits(PLAN_LIMITS.premium); // the upgrade's push, landing during that read
      const first = await admission;
      await push;
      const second = await object.admitKey(keyHash);
      return [first, second].map((a) => (a.status === "active" ? a.decision.limits.per_minute : a.status));
    });
    // The first decision may predate the push; from the push on, the new plan holds.
    expect(limits[1]).toBe(300);
    expect((await get(key)).headers.get("X-RateLimit-Limit")).toBe("300");
  });

  it("a restriction push that arrives after a later PATCH's leaves the key decided by what D1 holds", async () => {
    at(0);
    const { token, keyId, key } = await freshAccount({ plan: "premium" });
    await expectJson(await get(key), 200);
    const patch = (allowed_ips: string[]) => call("PATCH", `/api-keys/${keyId}`, { token, body: { allowed_ips } });
    await expectJson(await patch(["192.0.2.1/32"]), 200);
    await expectJson(await patch(["192.0.2.2/32"]), 200);
    // The first PATCH's push, delayed in the network, lands last.
    await (await objectOf(key)).refresh(await hashApiKey(key));
    const fromSecond = await call("GET", "/competitors", { token: key, headers: { "CF-Connecting-IP": "192.0.2.2" } });
    expect(fromSecond.status).toBe(200);
    const fromFirst = await call("GET", "/competitors", { token: key, headers: { "CF-Connecting-IP": "192.0.2.1" } });
    expect(fromFirst.status).toBe(403);
  });
});
