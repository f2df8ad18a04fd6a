import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { call, expectJson } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function expectRequestId(res: Response): string {
  const id = res.headers.get("X-Request-Id");
  expect(id, `X-Request-Id on a ${res.status}`).toBeTruthy();
  return id!;
}

async function activeKeys(accountId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND status = 'active'")
    .bind(accountId)
    .first<{ n: number }>();
  return row!.n;
}

/**
 * Gives the account `count` active keys by writing the rows directly: an account login is rate-limited
 * to 60 requests a minute, so 100 keys cannot be made through the API within one test. The rows look
 * like the API's own (unique id and hash, the listing prefix), so the cap counts them the same way.
 */
async function seedKeys(token: string, accountId: string, count: number): Promise<string[]> {
  await expectJson(await call("GET", "/account", { token }), 200); // the account row, created on first sight
  const ids = Array.from({ length: count }, () => `key_${crypto.randomUUID().replaceAll("-", "")}`);
  const insert = env.DB.prepare(
    "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at) VALUES (?, ?, ?, ?, ?, 'active', ?)",
  );
  await env.DB.batch(
    ids.map((id, i) =>
      insert.bind(
        id,
        accountId,
        `seeded ${i}`,
        "pda_live_seeded0",
        `seeded-hash-${id}`,
        new Date(Date.now() - (count - i) * 1000).toISOString(),
      ),
    ),
  );
  expect(await activeKeys(accountId)).toBe(count);
  return ids;
}

describe("one account cannot see or touch another's keys", () => {
  it("B cannot list, rename or revoke A's key; A's key stays active and unchanged", async () => {
    const alice = await accountToken("iso-alice");
    const bob = await accountToken("iso-bob");

    const created = await expectJson(await call("POST", "/api-keys", { token: alice, body: { name: "Alice's key" } }), 201);
    const bobsOwn = await expectJson(await call("POST", "/api-keys", { token: bob, body: { name: "Bob's key" } }), 201);

    const bobList = await call("GET", "/api-keys", { token: bob });
    expectRequestId(bobList);
    const bobKeys = (await expectJson(bobList, 200)).api_keys;
    expect(bobKeys.map((k) => k.id)).toEqual([bobsOwn.id]);
    expect(JSON.stringify(bobKeys)).not.toContain(created.id);
    expect(JSON.stringify(bobKeys)).not.toContain(created.prefix);

    const patch = await call("PATCH", `/api-keys/${created.id}`, { token: bob, body: { name: "Bob was here" } });
    expect(await expectJson(patch, 404)).toEqual({ detail: expect.any(String) });
    expectRequestId(patch);

    const del = await call("DELETE", `/api-keys/${created.id}`, { token: bob });
    expect(await expectJson(del, 404)).toEqual({ detail: expect.any(String) });
    expectRequestId(del);

    // The 404 for another account's key is indistinguishable from the 404 for a key that does not exist.
    const missing = await expectJson(await call("DELETE", "/api-keys/key_00000000000000000000000000000000", { token: bob }), 404);
    expect((await expectJson(await call("DELETE", `/api-keys/${created.id}`, { token: bob }), 404)).detail).toBe(
      missing.detail.replace("key_00000000000000000000000000000000", created.id),
    );

    const aliceKeys = (await expectJson(await call("GET", "/api-keys", { token: alice }), 200)).api_keys;
    expect(aliceKeys).toEqual([
      {
        id: created.id,
        name: "Alice's key",
        prefix: created.prefix,
        environment: "live",
        kind: "api_key",
        status: "active",
        created_at: created.created_at,
        last_used_at: null,
        revoked_at: null,
        revoked_reason: null,
        leaked_at: null,
        leak_url: null,
        expires_at: null,
        rotated_from: null,
        rotated_to: null,
        allowed_ips: null,
        scopes: ["products:read", "history:read", "events:read", "sandbox:write"],
      },
    ]);
    const row = await env.DB.prepare("SELECT account_id, name, status, revoked_at FROM api_keys WHERE id = ?").bind(created.id).first();
    expect(row).toEqual({ account_id: "iso-alice", name: "Alice's key", status: "active", revoked_at: null });
  });

  it("B cannot revoke A's already-revoked key either (404, not A's record)", async () => {
    const alice = await accountToken("iso-alice-2");
    const bob = await accountToken("iso-bob-2");
    const created = await expectJson(await call("POST", "/api-keys", { token: alice, body: { name: "to revoke" } }), 201);
    await expectJson(await call("DELETE", `/api-keys/${created.id}`, { token: alice }), 200);
    const res = await call("DELETE", `/api-keys/${created.id}`, { token: bob });
    const body = await expectJson(res, 404);
    expect(JSON.stringify(body)).not.toContain("to revoke");
  });

  it("an unknown key id in one's own account: 404 on PATCH and DELETE", async () => {
    const token = await accountToken("iso-unknown");
    await expectJson(await call("PATCH", "/api-keys/key_nope", { token, body: { name: "x" } }), 404);
    await expectJson(await call("DELETE", "/api-keys/key_nope", { token }), 404);
  });

  it("the listing is newest first and includes revoked keys with revoked_at", async () => {
    const token = await accountToken("iso-order");
    const ids: string[] = [];
    for (const name of ["first", "second", "third"]) {
      ids.push((await expectJson(await call("POST", "/api-keys", { token, body: { name } }), 201)).id);
    }
    await expectJson(await call("DELETE", `/api-keys/${ids[1]}`, { token }), 200);
    const keys = (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys as {
      id: string;
      created_at: string;
      status: string;
      revoked_at: string | null;
    }[];
    expect(keys.map((k) => k.id).sort()).toEqual([...ids].sort());
    for (let i = 1; i < keys.length; i++) expect(keys[i - 1]!.created_at >= keys[i]!.created_at).toBe(true);
    const revoked = keys.find((k) => k.id === ids[1])!;
    expect(revoked.status).toBe("revoked");
    expect(revoked.revoked_at).toMatch(ISO_UTC);
    for (const key of keys)
      expect(Object.keys(key).sort()).toEqual([
        "allowed_ips",
        "created_at",
        "environment",
        "expires_at",
        "id",
        "kind",
        "last_used_at",
        "leak_url",
        "leaked_at",
        "name",
        "prefix",
        "revoked_at",
        "revoked_reason",
        "rotated_from",
        "rotated_to",
        "scopes",
        "status",
      ]);
  });
});

describe("at most 100 active keys per account", () => {
  it("the 100th key can be made through the API, the 101st is 409; revoking one allows one more; the cap is per account", async () => {
    const token = await accountToken("cap-100");
    const seeded = await seedKeys(token, "cap-100", 99);
    const hundredth = await expectJson(await call("POST", "/api-keys", { token, body: { name: "the 100th" } }), 201);
    expect(await activeKeys("cap-100")).toBe(100);

    const over = await call("POST", "/api-keys", { token, body: { name: "one too many" } });
    const overBody = await expectJson(over, 409);
    expect(overBody).toEqual({ detail: expect.stringContaining("100") });
    expect(over.headers.get("Content-Type")).toMatch(/^application\/json/);
    expectRequestId(over);
    expect(await activeKeys("cap-100")).toBe(100);

    // Revoking a key made through the API, or a seeded one, frees exactly one place each time.
    await expectJson(await call("DELETE", `/api-keys/${hundredth.id}`, { token }), 200);
    expect(await activeKeys("cap-100")).toBe(99);
    await expectJson(await call("POST", "/api-keys", { token, body: { name: "replacement" } }), 201);
    await expectJson(await call("POST", "/api-keys", { token, body: { name: "still too many" } }), 409);
    await expectJson(await call("DELETE", `/api-keys/${seeded[0]}`, { token }), 200);
    await expectJson(await call("POST", "/api-keys", { token, body: { name: "second replacement" } }), 201);
    await expectJson(await call("POST", "/api-keys", { token, body: { name: "and still too many" } }), 409);
    expect(await activeKeys("cap-100")).toBe(100);

    // Revoked keys stay listed: 100 active + 2 revoked.
    const listed = (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys as { status: string }[];
    expect(listed).toHaveLength(102);
    expect(listed.filter((k) => k.status === "revoked")).toHaveLength(2);

    // Another account is not affected by this one being full.
    await expectJson(await call("POST", "/api-keys", { token: await accountToken("cap-100-neighbour"), body: { name: "mine" } }), 201);
  });

  it("10 concurrent creations at 95 active keys end with exactly 100 active", async () => {
    const token = await accountToken("cap-race");
    await seedKeys(token, "cap-race", 95);
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => call("POST", "/api-keys", { token, body: { name: `race ${i}` } })),
    );
    const statuses = responses.map((res) => res.status).sort();
    for (const res of responses) expectRequestId(res);
    expect(statuses).toEqual([201, 201, 201, 201, 201, 409, 409, 409, 409, 409]);
    expect(await activeKeys("cap-race")).toBe(100);

    // And a second burst at the cap admits nothing.
    const more = await Promise.all(Array.from({ length: 5 }, () => call("POST", "/api-keys", { token, body: { name: "late" } })));
    expect(more.map((res) => res.status)).toEqual([409, 409, 409, 409, 409]);
    expect(await activeKeys("cap-race")).toBe(100);
  });

  it("a burst of 30 concurrent creations at 90 active keys admits exactly 10", async () => {
    const token = await accountToken("cap-burst");
    await seedKeys(token, "cap-burst", 90);
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call("POST", "/api-keys", { token, body: { name: `burst ${i}` } })),
    );
    const created = responses.filter((res) => res.status === 201).length;
    const refused = responses.filter((res) => res.status === 409).length;
    expect([created, refused]).toEqual([10, 20]);
    expect(await activeKeys("cap-burst")).toBe(100);
  });
});
