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

describe("accounts are created on first sight", () => {
  it("GET /account creates the account on the Free plan with limits 10/600/14400, once", async () => {
    const exists = () => env.DB.prepare("SELECT plan FROM accounts WHERE id = ?").bind("first-sight").first();
    expect(await exists()).toBeNull();

    const token = await accountToken("first-sight");
    const res = await call("GET", "/account", { token });
    const account = await expectJson(res, 200);
    expectRequestId(res);
    expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
    expect(account).toEqual({
      id: "first-sight",
      plan: "free",
      limits: { per_minute: 10, per_hour: 600, per_day: 14_400 },
      created_at: expect.stringMatching(ISO_UTC),
    });
    expect(Math.abs(Date.parse(account.created_at) - Date.now())).toBeLessThan(60_000);
    expect(await exists()).toEqual({ plan: "free" });

    // Seen again (with a fresh token): the same account, not a new one.
    const again = await expectJson(await call("GET", "/account", { token: await accountToken("first-sight") }), 200);
    expect(again).toEqual(account);
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM accounts WHERE id = ?").bind("first-sight").first<{ n: number }>();
    expect(rows!.n).toBe(1);
  });

  it("any account route creates it, e.g. GET /api-keys", async () => {
    await expectJson(await call("GET", "/api-keys", { token: await accountToken("first-via-keys") }), 200);
    const row = await env.DB.prepare("SELECT plan FROM accounts WHERE id = ?").bind("first-via-keys").first();
    expect(row).toEqual({ plan: "free" });
  });

  it("concurrent first requests of one sub create exactly one account", async () => {
    const token = await accountToken("first-concurrent");
    const responses = await Promise.all(Array.from({ length: 8 }, () => call("GET", "/account", { token })));
    const bodies = await Promise.all(responses.map((res) => expectJson(res, 200)));
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM accounts WHERE id = ?").bind("first-concurrent").first<{ n: number }>();
    expect(rows!.n).toBe(1);
  });
});
