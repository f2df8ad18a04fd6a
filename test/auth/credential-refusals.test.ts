import { describe, expect, it } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";

/**
 * A refusal says what the route takes, in the caller's terms (issue 53): a bearer that is not a well-formed API key, on
 * an API-key route, is told what a key looks like, not about JWTs; an API key on a login or admin route is told which
 * environment's key it is and which credential the route takes.
 */

async function detailOf(res: Response, status: number): Promise<string> {
  expect(res.status).toBe(status);
  return ((await res.json()) as { detail: string }).detail;
}

describe("a bearer that is not a well-formed API key, on an API-key route", () => {
  it('"Bearer hello" on /products: 401 invalid_token, told what an API key looks like, not about JWTs', async () => {
    const res = await call("GET", "/products", { token: "hello" });
    expect(res.headers.get("WWW-Authenticate")).toBe('Bearer realm="price-data-api", error="invalid_token"');
    const detail = await detailOf(res, 401);
    expect(detail).toContain("pda_live_");
    expect(detail).toContain("pda_test_");
    expect(detail).not.toMatch(/JWT/);
  });

  it("a key pasted with its quotes, or with a stray character around it: told to send the key alone", async () => {
    const { key } = await freshAccount();
    for (const pasted of [`"${key}"`, `'${key}'`, `${key},`]) {
      const detail = await detailOf(await call("GET", "/products", { token: pasted }), 401);
      expect(detail).toMatch(/quote|around/i);
      expect(detail).not.toMatch(/JWT/);
    }
  });

  it("a signed JWT on /products is still told the route needs an API key (the contract's 401)", async () => {
    const { token } = await freshAccount();
    expect(await detailOf(await call("GET", "/products", { token }), 401)).toMatch(/API key/);
  });

  it('"Bearer hello" on a login route is still about the JWT it should have been', async () => {
    expect(await detailOf(await call("GET", "/api-keys", { token: "hello" }), 401)).toMatch(/JWT/);
  });
});

describe("an API key on a route that takes a login or an admin token", () => {
  it("a test key on POST /admin/observations: 403 naming the test key and the admin token the route takes", async () => {
    const { token } = await freshAccount();
    const { key } = await expectJson(await call("POST", "/api-keys", { token, body: { name: "test", environment: "test" } }), 201);
    const detail = await detailOf(await call("POST", "/admin/observations", { token: key, body: { observations: [] } }), 403);
    expect(detail).toMatch(/test API key/);
    expect(detail).toMatch(/admin/);
    expect(detail).toContain("prices:write");
    expect(detail).not.toMatch(/account login/);
  });

  it("a live key on /api-keys: 403, API keys cannot manage keys or accounts, the route takes the account login", async () => {
    const { key } = await freshAccount();
    const detail = await detailOf(await call("GET", "/api-keys", { token: key }), 403);
    expect(detail).toMatch(/live API key/);
    expect(detail).toMatch(/API keys cannot manage keys or accounts/);
    expect(detail).toMatch(/account login/);
  });
});
