import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { fakeDateAt } from "../helpers/clock.ts";
import { call, expectJson } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";

// A fake Date, shared by the worker and its Durable Objects in these tests.
const T0 = Date.parse("2030-06-01T10:00:00Z");
fakeDateAt(T0);

const get = (key: string) => call("GET", "/competitors", { token: key });
const iso = (ms: number) => new Date(ms).toISOString();
const rotate = (token: string, id: string, body?: unknown) => call("POST", `/api-keys/${id}/rotate`, { token, body });
const listed = async (token: string) => (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys;

describe("rotation", () => {
  it("both keys work during the grace; the old one is refused from its last millisecond on", async () => {
    const { sub, token, key, keyId } = await freshAccount({ plan: "standard" });
    expect((await get(key)).status).toBe(200); // the object holds the key's state before the rotation

    const res = await rotate(token, keyId, { grace_seconds: 3600 });
    const successor = await expectJson(res, 201);
    expect(res.headers.get("Cache-Control")).toBe("no-store");
    expect(successor).toMatchObject({
      name: "test key",
      status: "active",
      rotated_from: keyId,
      rotated_to: null,
      expires_at: null,
      created_at: iso(T0),
    });
    expect(successor.key).toMatch(/^pda_live_/);
    expect(successor.prefix).toBe(successor.key.slice(0, 17));

    const graceEnd = T0 + 3_600_000;
    const keys = await listed(token);
    expect(keys.find((k) => k.id === successor.id)).toMatchObject({ rotated_from: keyId, status: "active" });
    expect(keys.find((k) => k.id === keyId)).toMatchObject({
      status: "active",
      expires_at: iso(graceEnd),
      rotated_to: successor.id,
      rotated_from: null,
    });
    expect(JSON.stringify(await listed(token))).not.toContain(successor.key);

    vi.setSystemTime(graceEnd - 1);
    expect((await get(key)).status).toBe(200);
    expect((await get(successor.key)).status).toBe(200);
    vi.setSystemTime(graceEnd);
    expect((await expectJson(await get(key), 401)).detail).toContain(`expired at ${iso(graceEnd)}`);
    expect((await get(successor.key)).status).toBe(200);
    const after = await listed(await accountToken(sub));
    expect(Object.fromEntries(after.map((k) => [k.id, k.status]))).toEqual({ [keyId]: "expired", [successor.id]: "active" });
  });

  it("grace 0: the old key is refused at once; no body: a day's grace", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "free" });
    expect(await expectJson(await rotate(token, keyId, { grace_seconds: 0 }), 201)).toMatchObject({ rotated_from: keyId });
    expect((await expectJson(await get(key), 401)).detail).toContain("expired");

    const other = await freshAccount({ plan: "free" });
    await expectJson(await rotate(other.token, other.keyId), 201);
    expect((await listed(other.token)).find((k) => k.id === other.keyId)).toMatchObject({ expires_at: iso(T0 + 86_400_000) });
  });

  it("keeps an earlier expiry: a rotation never lengthens a key's life", async () => {
    const token = await accountToken("rotate-early-expiry");
    const soon = T0 + 600_000;
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "Short-lived", expires_at: iso(soon) } }), 201);
    const successor = await expectJson(await rotate(token, created.id, { grace_seconds: 86_400 }), 201);
    expect(successor).toMatchObject({ name: "Short-lived", expires_at: null });
    expect((await listed(token)).find((k) => k.id === created.id)).toMatchObject({ expires_at: iso(soon), rotated_to: successor.id });
  });

  /** Fills the account with filler keys that can authenticate, up to `count` keys in all. */
  async function fillTo(sub: string, count: number, existing = 1) {
    const insert = env.DB.prepare(
      "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at) VALUES (?, ?, 'filler', 'pda_live_x', ?, 'active', ?)",
    );
    await env.DB.batch(
      Array.from({ length: count - existing }, (_, i) => insert.bind(`key_filler${i}_${sub}`, sub, `hash-${i}-${sub}`, iso(T0 - 1000))),
    );
  }

  it("at the 100-key cap: a rotation with a grace is 409 saying what to do; grace 0 replaces the key at once", async () => {
    const { sub, token, key, keyId } = await freshAccount({ plan: "free" });
    await fillTo(sub, 100);
    expect((await expectJson(await call("POST", "/api-keys", { token, body: { name: "101st" } }), 409)).detail).toContain(
      "100 active keys",
    );
    const refused = await expectJson(await rotate(token, keyId, { grace_seconds: 60 }), 409);
    expect(refused.detail).toContain("revoke a key");
    expect(refused.detail).toContain("grace_seconds: 0");
    // Nothing changed: the key still works and is not rotated.
    expect((await listed(token)).find((k) => k.id === keyId)).toMatchObject({ status: "active", rotated_to: null, expires_at: null });
    expect((await get(key)).status).toBe(200);

    const successor = await expectJson(await rotate(token, keyId, { grace_seconds: 0 }), 201);
    expect((await get(key)).status).toBe(401);
    expect((await get(successor.key)).status).toBe(200);
    await expectJson(await call("POST", "/api-keys", { token, body: { name: "101st" } }), 409);
  });

  it("a chain of rotations with a grace cannot pass the cap: every key that can authenticate counts", async () => {
    const { sub, token, keyId } = await freshAccount({ plan: "free" });
    await fillTo(sub, 97);
    let newest = keyId;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await rotate(token, newest, { grace_seconds: 604_800 });
      statuses.push(res.status);
      if (res.status === 201) newest = (await res.json<Schemas["CreatedApiKey"]>()).id;
    }
    expect(statuses).toEqual([201, 201, 201, 409, 409, 409]);
    const working = (await listed(token)).filter((k) => k.status === "active");
    expect(working).toHaveLength(100);
  });

  it("concurrent rotations and creations at the cap's edge never pass it", async () => {
    const { sub, token, keyId } = await freshAccount({ plan: "free" });
    await fillTo(sub, 98);
    const second = await expectJson(await call("POST", "/api-keys", { token, body: { name: "99th" } }), 201);
    const results = await Promise.all([
      rotate(token, keyId, { grace_seconds: 600 }),
      rotate(token, second.id, { grace_seconds: 600 }),
      call("POST", "/api-keys", { token, body: { name: "a" } }),
      call("POST", "/api-keys", { token, body: { name: "b" } }),
    ]);
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect((await listed(token)).filter((k) => k.status === "active")).toHaveLength(100);
  });

  it("a rotation D1 refuses, or one that loses a race, leaves the key's life as D1 lists it", async () => {
    const { sub, token, key, keyId } = await freshAccount({ plan: "free" });
    expect((await get(key)).status).toBe(200); // the object holds the key's state before the rotations
    await fillTo(sub, 100);
    await expectJson(await rotate(token, keyId, { grace_seconds: 60 }), 409); // at the cap
    vi.setSystemTime(T0 + 61_000);
    expect((await listed(token)).find((k) => k.id === keyId)).toMatchObject({ status: "active", expires_at: null });
    expect((await get(key)).status).toBe(200);

    const other = await freshAccount({ plan: "free" });
    expect((await get(other.key)).status).toBe(200);
    const statuses = (
      await Promise.all([
        rotate(other.token, other.keyId, { grace_seconds: 60 }),
        rotate(other.token, other.keyId, { grace_seconds: 3600 }),
      ])
    ).map((r) => r.status);
    expect(statuses.sort()).toEqual([201, 409]);
    vi.setSystemTime(T0 + 61_000 + 61_000);
    const row = (await listed(other.token)).find((k) => k.id === other.keyId)!;
    expect((await get(other.key)).status).toBe(row.status === "active" ? 200 : 401);
  });

  it("409 for a key already rotated, revoked or expired; 404 for another account's key", async () => {
    const { token, keyId } = await freshAccount({ plan: "free" });
    const successor = await expectJson(await rotate(token, keyId), 201);
    expect((await expectJson(await rotate(token, keyId), 409)).detail).toBe(
      `API key ${keyId} was already rotated to ${successor.id}; rotate that key instead.`,
    );

    await expectJson(await call("DELETE", `/api-keys/${successor.id}`, { token }), 200);
    expect((await expectJson(await rotate(token, successor.id), 409)).detail).toContain("revoked");

    const expiring = await expectJson(await call("POST", "/api-keys", { token, body: { name: "e", expires_at: iso(T0 + 1000) } }), 201);
    vi.setSystemTime(T0 + 1000);
    const fresh = await accountToken((await expectJson(await call("GET", "/account", { token }), 200)).id);
    expect((await expectJson(await rotate(fresh, expiring.id), 409)).detail).toContain(`expired at ${iso(T0 + 1000)}`);

    const other = await freshAccount({ plan: "free" });
    expect((await expectJson(await rotate(fresh, other.keyId), 404)).detail).toContain(other.keyId);
    expect((await listed(other.token))[0]).toMatchObject({ rotated_to: null, expires_at: null });
  });

  it("two concurrent rotations: exactly one succeeds, and the D1 rows agree", async () => {
    const { sub, token, keyId } = await freshAccount({ plan: "free" });
    const statuses = (await Promise.all([rotate(token, keyId), rotate(token, keyId), rotate(token, keyId)])).map((r) => r.status).sort();
    expect(statuses).toEqual([201, 409, 409]);
    const rows = (await env.DB.prepare("SELECT id, rotated_from, rotated_to FROM api_keys WHERE account_id = ?").bind(sub).all()).results;
    expect(rows).toHaveLength(2);
    const old = rows.find((r) => r.id === keyId)!;
    const successor = rows.find((r) => r.id !== keyId)!;
    expect(old.rotated_to).toBe(successor.id);
    expect(successor.rotated_from).toBe(keyId);
  });
});

describe("bad grace_seconds: 400 naming the field, nothing written", () => {
  it.each([
    ["negative", -1],
    ["over 7 days", 604_801],
    ["fractional", 1.5],
    ["a string", "3600"],
    ["null", null],
  ])("%s", async (_name, grace) => {
    const { token, key, keyId } = await freshAccount({ plan: "free" });
    const body = await expectJson(await rotate(token, keyId, { grace_seconds: grace }), 400);
    expect(body.detail).toContain("grace_seconds");
    const keys = await listed(token);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ expires_at: null, rotated_to: null });
    // The key's object was not told anything either: the key outlives any grace.
    vi.setSystemTime(T0 + 8 * 86_400_000);
    expect((await get(key)).status).toBe(200);
  });

  it("an unknown field: 400", async () => {
    const { token, keyId } = await freshAccount({ plan: "free" });
    expect((await expectJson(await rotate(token, keyId, { grace: 10 }), 400)).detail).toContain("grace");
  });
});
