import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { call, expectJson } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";

async function keyCount(): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM api_keys").first<{ n: number }>();
  return row!.n;
}

/** 400 (or the given status) with a JSON `detail`, and the api_keys table exactly as it was. */
async function expectRefused(res: Response, before: number, status = 400): Promise<string> {
  const body = await expectJson<ApiError>(res, status);
  expect(body).toEqual({ detail: expect.any(String) });
  expect(body.detail.trim()).not.toBe("");
  expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
  expect(res.headers.get("X-Request-Id")).toBeTruthy();
  expect(await keyCount()).toBe(before);
  return body.detail;
}

const rocket = "🚀"; // one code point, two UTF-16 units

describe("POST /api-keys body validation", () => {
  const cases: [string, unknown, RegExp][] = [
    ["missing name", {}, /name/],
    ['name ""', { name: "" }, /name/],
    ["name of only spaces", { name: "     " }, /name/],
    ["name of only tabs and newlines", { name: "\t\n " }, /name/],
    ["101-character name", { name: "a".repeat(101) }, /name/],
    ["101-emoji name", { name: rocket.repeat(101) }, /name/],
    ["name as a number", { name: 42 }, /name/],
    ["name as null", { name: null }, /name/],
    ["name as an array", { name: ["a"] }, /name/],
    ["name as an object", { name: { first: "a" } }, /name/],
    ["name with a control character", { name: "prod\u0000key" }, /name/],
    ["name with a newline inside", { name: "prod\nkey" }, /name/],
    ["a JSON array", [{ name: "a" }], /object/i],
    ["a JSON string", '"just a string"', /object/i],
    ["JSON null", "null", /object/i],
    ["a JSON number", "7", /object/i],
    ["non-JSON text", "name=hello", /JSON/],
    ["truncated JSON", '{"name": "abc"', /JSON/],
    ["an empty body", "", /empty|JSON/i],
    ["a whitespace-only body", "   \n", /empty|JSON/i],
  ];

  for (const [i, [label, body, detailPattern]] of cases.entries()) {
    it(`${label}: 400, detail ${detailPattern}, nothing written`, async () => {
      const token = await accountToken(`validator-${i}`);
      const before = await keyCount();
      const detail = await expectRefused(await call("POST", "/api-keys", { token, body }), before);
      expect(detail).toMatch(detailPattern);
    });
  }

  it("no body at all: 400, nothing written", async () => {
    const token = await accountToken("validator-no-body");
    const before = await keyCount();
    await expectRefused(await call("POST", "/api-keys", { token }), before);
  });

  it("an extra unknown field: 400, nothing written", async () => {
    const token = await accountToken("validator-extra");
    const before = await keyCount();
    await expectRefused(await call("POST", "/api-keys", { token, body: { name: "ok", scope: "admin" } }), before);
  });

  // The detail must name the field, not only say the body is wrong (z.strictObject's `error` option once hid it).
  it("an extra unknown field: the detail names that field", async () => {
    const token = await accountToken("validator-extra-named");
    const res = await call("POST", "/api-keys", { token, body: { name: "ok", scope: "admin" } });
    expect((await expectJson(res, 400)).detail).toContain("scope");
  });

  it("a 2 MiB body: 413, nothing written", async () => {
    const token = await accountToken("validator-2mib");
    const before = await keyCount();
    const body = JSON.stringify({ name: "big" }) + " ".repeat(2 * 1024 * 1024);
    const detail = await expectRefused(await call("POST", "/api-keys", { token, body }), before, 413);
    expect(detail).toMatch(/1 MiB/);
  });

  it("the 1 MiB limit is exact: 1 MiB of valid JSON is accepted, one byte more is 413", async () => {
    const token = await accountToken("size-limit");
    const json = JSON.stringify({ name: "exactly one MiB" });
    const atLimit = json + " ".repeat(1024 * 1024 - json.length);
    expect(atLimit.length).toBe(1024 * 1024);
    await expectJson(await call("POST", "/api-keys", { token, body: atLimit }), 201);

    const before = await keyCount();
    await expectRefused(await call("POST", "/api-keys", { token, body: `${atLimit} ` }), before, 413);
  });
});

describe("POST /api-keys accepted names", () => {
  it("a 100-character name is accepted as is", async () => {
    const token = await accountToken("accept-100");
    const name = "n".repeat(100);
    expect((await expectJson(await call("POST", "/api-keys", { token, body: { name } }), 201)).name).toBe(name);
  });

  it("a 100-emoji name is accepted (length counts code points, not UTF-16 units)", async () => {
    const token = await accountToken("accept-emoji");
    const name = rocket.repeat(100);
    expect(name.length).toBe(200);
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name } }), 201);
    expect(created.name).toBe(name);
    const listed = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(listed.api_keys[0]!.name).toBe(name);
  });

  it("a one-character name is accepted", async () => {
    const token = await accountToken("accept-1");
    expect((await expectJson(await call("POST", "/api-keys", { token, body: { name: "x" } }), 201)).name).toBe("x");
  });

  it("surrounding whitespace is trimmed before the length check and storage", async () => {
    const token = await accountToken("accept-trim");
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: `  ${"t".repeat(100)}  ` } }), 201);
    expect(created.name).toBe("t".repeat(100));
  });

  it('a Unicode name ("Prod — 東京 🚀") round-trips in create, list, rename and revoke', async () => {
    const token = await accountToken("accept-unicode");
    const name = "Prod — 東京 🚀";
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name } }), 201);
    expect(created.name).toBe(name);

    const listed = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(listed.api_keys).toEqual([expect.objectContaining({ id: created.id, name })]);

    const renamedTo = "Staging — Zürich 🧪 ñ";
    expect((await expectJson(await call("PATCH", `/api-keys/${created.id}`, { token, body: { name: renamedTo } }), 200)).name).toBe(
      renamedTo,
    );
    expect((await expectJson(await call("DELETE", `/api-keys/${created.id}`, { token }), 200)).name).toBe(renamedTo);

    const row = await env.DB.prepare("SELECT name FROM api_keys WHERE id = ?").bind(created.id).first<{ name: string }>();
    expect(row!.name).toBe(renamedTo);
  });

  it("a JSON body sent as application/x-www-form-urlencoded is read as JSON (curl -d)", async () => {
    const token = await accountToken("accept-form-type");
    const res = await call("POST", "/api-keys", {
      token,
      body: JSON.stringify({ name: "from curl" }),
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    const created = await expectJson(res, 201);
    expect(created).toMatchObject({ name: "from curl", status: "active" });
    expect(created.key).toMatch(/^pda_live_/);
  });

  it("a JSON body sent as text/plain, and one with a charset parameter, are accepted", async () => {
    const token = await accountToken("accept-other-types");
    for (const type of ["text/plain", "application/json; charset=utf-8"]) {
      const res = await call("POST", "/api-keys", { token, body: JSON.stringify({ name: type }), headers: { "Content-Type": type } });
      expect((await expectJson(res, 201)).name).toBe(type);
    }
  });

  it("the created response is not cacheable", async () => {
    const token = await accountToken("accept-no-store");
    const res = await call("POST", "/api-keys", { token, body: { name: "secret shown once" } });
    await expectJson(res, 201);
    expect(res.headers.get("Cache-Control")).toContain("no-store");
  });
});

describe("PATCH /api-keys/:id body validation", () => {
  const badBodies: [string, unknown][] = [
    ["no field at all", {}],
    ['name ""', { name: "" }],
    ["name of only spaces", { name: "   " }],
    ["101-character name", { name: "b".repeat(101) }],
    ["name as a number", { name: 1 }],
    ["name as null", { name: null }],
    ["an extra unknown field", { name: "new", status: "active" }],
    ["a JSON array", [{ name: "new" }]],
    ["non-JSON text", "rename me"],
    ["an empty body", ""],
  ];

  it("every bad body is 400 and the name stays unchanged", async () => {
    const token = await accountToken("patcher");
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "Original" } }), 201);
    for (const [label, body] of badBodies) {
      const res = await call("PATCH", `/api-keys/${created.id}`, { token, body });
      const json = await expectJson(res, 400);
      expect(json, label).toEqual({ detail: expect.any(String) });
      if (typeof body === "object" && body !== null && !Array.isArray(body) && !("status" in body)) {
        expect(json.detail, label).toContain("name");
      }
    }
    const oversized = await call("PATCH", `/api-keys/${created.id}`, {
      token,
      body: JSON.stringify({ name: "big" }) + " ".repeat(2 * 1024 * 1024),
    });
    await expectJson(oversized, 413);

    const listed = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(listed.api_keys).toEqual([expect.objectContaining({ id: created.id, name: "Original", status: "active" })]);
    const row = await env.DB.prepare("SELECT name, status FROM api_keys WHERE id = ?").bind(created.id).first();
    expect(row).toEqual({ name: "Original", status: "active" });
  });

  it("PATCH cannot change anything but the name (status in the body is refused, the key stays active)", async () => {
    const token = await accountToken("patcher-status");
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "Keep active" } }), 201);
    await expectJson(await call("PATCH", `/api-keys/${created.id}`, { token, body: { status: "revoked" } }), 400);
    await expectJson(
      await call("PATCH", `/api-keys/${created.id}`, { token, body: { name: "x", revoked_at: "2020-01-01T00:00:00Z" } }),
      400,
    );
    const listed = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(listed.api_keys[0]).toMatchObject({ name: "Keep active", status: "active", revoked_at: null });
  });

  it("a valid rename trims, and answers the full record without the key", async () => {
    const token = await accountToken("patcher-ok");
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "Before" } }), 201);
    const renamed = await expectJson(await call("PATCH", `/api-keys/${created.id}`, { token, body: { name: "  After  " } }), 200);
    expect(renamed).toEqual({
      id: created.id,
      name: "After",
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
    });
  });

  it("PATCH of an unknown id with a valid body: 404", async () => {
    const token = await accountToken("patcher-404");
    const res = await call("PATCH", "/api-keys/key_doesnotexist", { token, body: { name: "x" } });
    expect((await expectJson(res, 404)).detail).toContain("key_doesnotexist");
  });
});
