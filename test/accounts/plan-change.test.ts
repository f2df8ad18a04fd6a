import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { setAccountPlan } from "../../src/accounts/service.ts";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { keyObjectControl } from "../../src/api-keys/object/stub.ts";
import type { KeyObjectControl } from "../../src/api-keys/object/types.ts";
import worker from "../../src/index.ts";
import { database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf, workCounts } from "../helpers/http.ts";
import { adminToken } from "../helpers/tokens.ts";

/** `count` keys of the account that can no longer authenticate: status still active, expired a minute ago (as rotations leave them). */
async function expiredKeys(accountId: string, count: number) {
  const expiredAt = new Date(Date.now() - 60_000).toISOString();
  const insert = env.DB.prepare(
    "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, expires_at) VALUES (?, ?, 'expired', 'pda_live_00000000', ?, 'active', ?)",
  );
  const rows = Array.from({ length: count }, () => {
    const id = crypto.randomUUID().replaceAll("-", "");
    return insert.bind(`key_${id}`, accountId, `expired-${id}`, expiredAt);
  });
  await env.DB.batch(rows);
}

describe("a plan change", () => {
  it("calls only the objects of keys that can authenticate, and they run on the new plan from their next request", async () => {
    const { sub, token, key } = await freshAccount();
    const live = [key, (await addKey(token)).key, (await addKey(token)).key];
    for (const k of live) expect(rateLimitOf(await call("GET", "/competitors", { token: k })).limit).toBe(10);
    await expiredKeys(sub, 1_000);

    const res = await call("PUT", `/admin/accounts/${sub}/plan`, { token: await adminToken(), body: { plan: "premium" } });
    await expectJson(res, 200);
    expect(workCounts(res).keyDo).toBe(live.length); // not the 1,000 that expired

    for (const k of live) expect(rateLimitOf(await call("GET", "/competitors", { token: k })).limit).toBe(300);
  });

  it("that cannot reach a key's object still answers 200, and the key runs on the new plan after the next cron run", async () => {
    const { sub, key } = await freshAccount();
    expect(rateLimitOf(await call("GET", "/competitors", { token: key })).limit).toBe(10);
    // Every object out of reach for the change itself.
    const control = keyObjectControl(env, new WorkMeter());
    const unreachable: KeyObjectControl = { ...control, setLimits: async (hashes) => [...hashes] };
    const account = await setAccountPlan({ db: database(env.DB), keyObjects: unreachable }, { accountId: sub, plan: "premium" });
    expect(account.limits.per_minute).toBe(300);

    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    expect(rateLimitOf(await call("GET", "/competitors", { token: key })).limit).toBe(300);
    const left = await env.DB.prepare("SELECT count(*) AS n FROM unreached_plan_pushes WHERE key_hash = ?")
      .bind(await hashApiKey(key))
      .first();
    expect(left).toEqual({ n: 0 });
  });

  it("GET /account/usage calls at most 100 keys' objects", async () => {
    const { sub, token } = await freshAccount();
    await expiredKeys(sub, 1_000);
    const res = await call("GET", "/account/usage?granularity=minute", { token });
    await expectJson(res, 200);
    expect(workCounts(res).keyDo).toBeLessThanOrEqual(100);
    expect(workCounts(res).keyDo).toBeGreaterThan(0);
  });
});

describe("concurrent PATCHes of a key", () => {
  it("leave its object deciding by the restrictions D1 holds", async () => {
    const { token, keyId, key } = await freshAccount({ plan: "premium" });
    await expectJson(await call("GET", "/competitors", { token: key }), 200); // its object holds the key
    const variants = Array.from({ length: 16 }, (_, i) => ({
      allowed_ips: [`192.0.2.${i}/32`],
      scopes: i % 2 === 0 ? ["products:read", "events:read"] : ["events:read"],
    }));
    // Two rounds: at most 60 account-login requests a minute.
    for (let round = 0; round < 2; round++) {
      const answers = await Promise.all(variants.map((body) => call("PATCH", `/api-keys/${keyId}`, { token, body })));
      for (const answer of answers) await expectJson(answer, 200);

      const { api_keys } = await expectJson(await call("GET", "/api-keys", { token }), 200);
      const stored = api_keys.find((k) => k.id === keyId)!;
      const [allowed] = stored.allowed_ips!;
      const ip = allowed!.replace("/32", "");
      const competitors = stored.scopes.includes("products:read") ? 200 : 403;
      for (const variant of variants) {
        const from = variant.allowed_ips[0]!.replace("/32", "");
        const res = await call("GET", "/events", { token: key, headers: { "CF-Connecting-IP": from } });
        expect(res.status, `from ${from} while D1 allows ${ip}`).toBe(from === ip ? 200 : 403);
        await res.body?.cancel();
      }
      const res = await call("GET", "/competitors", { token: key, headers: { "CF-Connecting-IP": ip } });
      expect(res.status, `competitors with scopes ${stored.scopes.join(",")}`).toBe(competitors);
      await res.body?.cancel();
    }
  });
});
