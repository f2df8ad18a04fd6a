import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { fakeDateAt } from "../helpers/clock.ts";
import { call, expectJson, rateLimitOf, workCounts } from "../helpers/http.ts";
import { accountToken, adminToken } from "../helpers/tokens.ts";

// A fake Date, shared by the worker and its Durable Objects in these tests.
const T0 = Date.parse("2030-05-01T08:00:00Z");
fakeDateAt(T0);

const get = (key: string) => call("GET", "/competitors", { token: key });
const iso = (ms: number) => new Date(ms).toISOString();
let accounts = 0;

async function keyExpiringAt(expiresAt: number, plan: "free" | "standard" = "standard") {
  const sub = `expiring-${++accounts}`;
  await expectJson(await call("PUT", `/admin/accounts/${sub}/plan`, { token: await adminToken(), body: { plan } }), 200);
  const token = await accountToken(sub);
  const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "Expiring", expires_at: iso(expiresAt) } }), 201);
  return { sub, token, created };
}

describe("a key with expires_at", () => {
  it("works until the millisecond before, and is refused by its object from that instant, with no D1 query", async () => {
    const expiresAt = T0 + 3_600_000;
    const { sub, created } = await keyExpiringAt(expiresAt);
    expect(created).toMatchObject({ status: "active", expires_at: iso(expiresAt), rotated_from: null, rotated_to: null });

    expect((await get(created.key)).status).toBe(200);
    vi.setSystemTime(expiresAt - 1);
    expect((await get(created.key)).status).toBe(200);

    vi.setSystemTime(expiresAt);
    const refused = await get(created.key);
    const body = await expectJson(refused, 401);
    expect(body.detail).toBe(`This API key expired at ${iso(expiresAt)}; use the key that replaced it, or create a new one.`);
    expect(refused.headers.get("WWW-Authenticate")).toContain('error="invalid_token"');
    // The key's object decided from its own state; the 401 is counted in the client IP's bucket.
    expect(workCounts(refused)).toEqual({ d1: 0, keyDo: 1, otherDo: 1 });

    const token = await accountToken(sub);
    const listed = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(listed.api_keys[0]).toMatchObject({ id: created.id, status: "expired", expires_at: iso(expiresAt) });
    vi.setSystemTime(expiresAt - 1);
    expect((await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys[0]!.status).toBe("active");
  });

  it("a key refused for its rate limit answers 401 from its expiry on", async () => {
    const expiresAt = T0 + 5_000;
    const { created } = await keyExpiringAt(expiresAt, "free");
    for (let i = 0; i < 10; i++) expect((await get(created.key)).status).toBe(200);
    const limited = await get(created.key);
    expect(limited.status).toBe(429);
    expect(rateLimitOf(limited).retryAfter).toBe(60);
    vi.setSystemTime(expiresAt - 1);
    expect((await get(created.key)).status).toBe(429);
    vi.setSystemTime(expiresAt);
    expect((await expectJson(await get(created.key), 401)).detail).toContain("expired");
  });

  it("an existing object learns the expiry from D1 when it wakes with no state (a key first used after creation)", async () => {
    const { created } = await keyExpiringAt(T0 + 1_000);
    vi.setSystemTime(T0 + 1_000);
    const res = await get(created.key);
    expect((await expectJson(res, 401)).detail).toContain("expired");
    expect(workCounts(res).d1).toBe(1);
  });
});

describe("bad expires_at: 400 naming the field, nothing written", () => {
  it.each([
    ["in the past", iso(T0 - 1), "must be in the future"],
    ["now", iso(T0), "must be in the future"],
    ["over a year ahead", iso(T0 + 365 * 86_400_000 + 1), "at most 1 year ahead"],
    ["not a date", "next week", "ISO-8601"],
    ["a number", 1_900_000_000, "string"],
    ["null", null, "string"],
  ])("%s", async (_name, expiresAt, message) => {
    const token = await accountToken(`bad-expiry-${++accounts}`);
    const body = await expectJson(await call("POST", "/api-keys", { token, body: { name: "x", expires_at: expiresAt } }), 400);
    expect(body.detail).toContain("expires_at");
    expect(body.detail).toContain(message);
    expect((await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys).toEqual([]);
  });

  it("exactly a year ahead is accepted", async () => {
    const token = await accountToken(`year-expiry-${++accounts}`);
    const created = await expectJson(
      await call("POST", "/api-keys", { token, body: { name: "x", expires_at: iso(T0 + 365 * 86_400_000) } }),
      201,
    );
    const row = await env.DB.prepare("SELECT expires_at FROM api_keys WHERE id = ?").bind(created.id).first();
    expect(row).toEqual({ expires_at: iso(T0 + 365 * 86_400_000) });
  });
});
