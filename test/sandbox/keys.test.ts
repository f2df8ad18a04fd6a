import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { isWellFormedApiKey, keyEnvironment } from "../../src/api-keys/format.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf } from "../helpers/http.ts";
import { found, report, sha256Hex } from "../helpers/secret-scanning.ts";
import { accountToken, adminToken } from "../helpers/tokens.ts";

/** Test mode's keys (contract, "Test mode"): `pda_test_` keys, their records, rotation, limits, the cap, secret scanning. */

const testKey = async (token: string, body: Record<string, unknown> = {}) =>
  expectJson(await call("POST", "/api-keys", { token, body: { name: "sandbox", environment: "test", ...body } }), 201);

describe("a test key", () => {
  it("reads pda_test_ + the same identifier as a live key (length, alphabet, checksum); its record shows its environment", async () => {
    const { token, key: live, keyId: liveId } = await freshAccount();
    const created = await testKey(token);
    expect(created.key).toMatch(/^pda_test_[0-9A-Za-z]{46}$/);
    expect(live).toMatch(/^pda_live_[0-9A-Za-z]{46}$/);
    expect(created.key.length).toBe(live.length);
    expect(isWellFormedApiKey(created.key, "pda")).toBe(true);
    expect(keyEnvironment(created.key, "pda")).toBe("test");
    expect(created.prefix).toBe(created.key.slice(0, "pda_test_".length + 8));
    expect(created.environment).toBe("test");
    const { api_keys } = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(api_keys.find((k) => k.id === created.id)).toMatchObject({ environment: "test", prefix: created.prefix });
    expect(api_keys.find((k) => k.id === liveId)).toMatchObject({ environment: "live" });
    // A changed checksum is refused before any storage, as for a live key.
    const broken = `${created.key.slice(0, -1)}${created.key.endsWith("a") ? "b" : "a"}`;
    expect((await expectJson(await call("GET", "/products", { token: broken }), 401)).detail).toMatch(/malformed/);
  });

  it("environment is live by default; anything but live or test is a 400 naming it", async () => {
    const { token } = await freshAccount();
    const plain = await expectJson(await call("POST", "/api-keys", { token, body: { name: "plain" } }), 201);
    expect(plain).toMatchObject({ environment: "live", key: expect.stringMatching(/^pda_live_/) });
    const bad = await call("POST", "/api-keys", { token, body: { name: "x", environment: "staging" } as never });
    expect((await expectJson(bad, 400)).detail).toMatch(/environment: must be live or test/);
  });

  it("rotation keeps the environment: a test key's successor is a test key", async () => {
    const { token } = await freshAccount();
    const created = await testKey(token);
    const successor = await expectJson(await call("POST", `/api-keys/${created.id}/rotate`, { token, body: { grace_seconds: 0 } }), 201);
    expect(successor).toMatchObject({ environment: "test", rotated_from: created.id, key: expect.stringMatching(/^pda_test_/) });
    await expectJson(await call("GET", "/products?sku=TEST-CF-0001", { token: successor.key }), 200);
  });

  it("has the standard plan's limits whatever the plan, and a plan change leaves them so", async () => {
    for (const plan of ["free", "premium"] as const) {
      const { token, key: live } = await freshAccount({ plan });
      const created = await testKey(token);
      expect(rateLimitOf(await call("GET", "/competitors", { token: created.key })).limit).toBe(60);
      expect(rateLimitOf(await call("GET", "/competitors", { token: live })).limit).toBe(plan === "free" ? 10 : 300);
    }
    const { sub, token, key: live } = await freshAccount({ plan: "free" });
    const created = await testKey(token);
    await call("GET", "/competitors", { token: created.key });
    await expectJson(
      await call("PUT", `/admin/accounts/${encodeURIComponent(sub)}/plan`, { token: await adminToken(), body: { plan: "premium" } }),
      200,
    );
    expect(rateLimitOf(await call("GET", "/competitors", { token: live })).limit).toBe(300);
    expect(rateLimitOf(await call("GET", "/competitors", { token: created.key })).limit).toBe(60);
  });

  it("counts within the 100-key cap", async () => {
    const sub = `cap-test-${Date.now()}`;
    const token = await accountToken(sub);
    await expectJson(await call("GET", "/account", { token }), 200);
    const insert = env.DB.prepare(
      "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, environment) VALUES (?, ?, 'seeded', 'pda_x', ?, 'active', ?)",
    );
    await env.DB.batch(
      Array.from({ length: 99 }, (_, i) => insert.bind(`key_seed${i}_${sub}`, sub, `hash-${i}-${sub}`, i % 2 ? "test" : "live")),
    );
    await testKey(token);
    const over = await call("POST", "/api-keys", { token, body: { name: "101st", environment: "test" } });
    expect((await expectJson(over, 409)).detail).toMatch(/100 active keys/);
    await expectJson(await call("POST", "/api-keys", { token, body: { name: "101st live" } }), 409);
  });

  it("is recognised by secret scanning: a reported test key is revoked as leaked", async () => {
    const { token } = await freshAccount();
    const created = await testKey(token);
    const feedback = await expectJson(await report([found(created.key)]), 200);
    expect(feedback).toEqual([{ token_hash: await sha256Hex(created.key), token_type: "price_data_api_key", label: "true_positive" }]);
    expect((await expectJson(await call("GET", "/products", { token: created.key }), 401)).detail).toMatch(/revoked/);
    const { api_keys } = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(api_keys.find((k) => k.id === created.id)).toMatchObject({ status: "revoked", revoked_reason: "leaked", environment: "test" });
  });
});
