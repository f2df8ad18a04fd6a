import { env } from "cloudflare:workers";
import { base64url, exportJWK, generateKeyPair, UnsecuredJWT } from "jose";
import { describe, expect, it } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { mintToken } from "../../scripts/mint-token.ts";
import { verifyIdpToken } from "../../src/auth/idp.ts";
import { type Config, readConfig } from "../../src/platform/config.ts";
import { call, expectJson } from "../helpers/http.ts";
import {
  accountToken,
  adminToken,
  nowSeconds,
  publicJwk,
  signClaims,
  signingJwk,
  TEST_AUDIENCE,
  TEST_ISSUER,
  validClaims,
} from "../helpers/tokens.ts";

const REALM = 'Bearer realm="price-data-api"';

/** 401 with the Bearer challenge and a JSON `detail`; `error="invalid_token"` exactly when a token was sent. */
async function expectUnauthorized(res: Response, tokenWasSent: boolean): Promise<string> {
  const body = await expectJson<ApiError>(res, 401);
  expect(body).toEqual({ detail: expect.any(String) });
  expect(body.detail.trim()).not.toBe("");
  expect(res.headers.get("Content-Type")).toMatch(/^application\/json/);
  expect(res.headers.get("X-Request-Id")).toBeTruthy();
  const challenge = res.headers.get("WWW-Authenticate");
  expect(challenge).not.toBeNull();
  expect(challenge!.startsWith(REALM), challenge!).toBe(true);
  if (tokenWasSent) expect(challenge).toContain('error="invalid_token"');
  else expect(challenge).toBe(REALM);
  return body.detail;
}

async function accountExists(id: string): Promise<boolean> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM accounts WHERE id = ?").bind(id).first<{ n: number }>();
  return row!.n > 0;
}

/** A forged token on GET /api-keys is refused, and its `sub` never becomes an account. */
async function expectRejected(token: string, sub: string): Promise<string> {
  const detail = await expectUnauthorized(await call("GET", "/api-keys", { token }), true);
  expect(await accountExists(sub)).toBe(false);
  return detail;
}

/** Replaces one character in the middle of a base64url segment (a middle character carries 6 full bits). */
function tamper(segment: string): string {
  const i = Math.floor(segment.length / 2);
  return segment.slice(0, i) + (segment[i] === "A" ? "B" : "A") + segment.slice(i + 1);
}

describe("missing or malformed Authorization header", () => {
  it("no Authorization header: 401 with the bare challenge", async () => {
    const detail = await expectUnauthorized(await call("GET", "/api-keys"), false);
    expect(detail).toMatch(/Bearer/);
  });

  it('"Basic xyz": 401', async () => {
    await expectUnauthorized(await call("GET", "/api-keys", { headers: { Authorization: "Basic xyz" } }), true);
  });

  it('"Bearer" with no token: 401', async () => {
    await expectUnauthorized(await call("GET", "/api-keys", { headers: { Authorization: "Bearer" } }), true);
  });

  it("two tokens after Bearer: 401", async () => {
    const token = await accountToken("two-tokens");
    await expectUnauthorized(await call("GET", "/api-keys", { headers: { Authorization: `Bearer ${token} ${token}` } }), true);
    expect(await accountExists("two-tokens")).toBe(false);
  });

  it('garbage token "abc": 401 invalid_token', async () => {
    await expectUnauthorized(await call("GET", "/api-keys", { token: "abc" }), true);
  });

  it("three dots of garbage shaped like a JWT: 401", async () => {
    await expectUnauthorized(await call("GET", "/api-keys", { token: "aaa.bbb.ccc" }), true);
  });

  it("the scheme name is case-insensitive (a valid token under `bearer` is accepted)", async () => {
    const token = await accountToken("lowercase-scheme");
    const res = await call("GET", "/api-keys", { headers: { Authorization: `bearer ${token}` } });
    expect(await expectJson(res, 200)).toEqual({ api_keys: [] });
  });
});

describe("IdP JWTs that must be refused", () => {
  it("another issuer", async () => {
    const token = await mintToken(signingJwk, { issuer: "https://evil.test/", audience: TEST_AUDIENCE, sub: "forged-iss" });
    const detail = await expectRejected(token, "forged-iss");
    expect(detail).toContain("iss");
  });

  it("another audience", async () => {
    const token = await mintToken(signingJwk, { issuer: TEST_ISSUER, audience: "some-other-api", sub: "forged-aud" });
    const detail = await expectRejected(token, "forged-aud");
    expect(detail).toContain("aud");
  });

  it("expired 10 minutes ago (well beyond the 60 s tolerance)", async () => {
    const token = await accountToken("forged-expired", { expiresIn: -600 });
    const detail = await expectRejected(token, "forged-expired");
    expect(detail).toMatch(/expired/i);
  });

  it("expired 90 s ago (just beyond the 60 s tolerance)", async () => {
    await expectRejected(await accountToken("forged-expired-90", { expiresIn: -90 }), "forged-expired-90");
  });

  it("not valid before 10 minutes from now", async () => {
    const token = await signClaims({ ...validClaims("forged-nbf"), nbf: nowSeconds() + 600 });
    await expectRejected(token, "forged-nbf");
  });

  it("alg none, unsigned", async () => {
    const token = new UnsecuredJWT(validClaims("forged-none")).encode();
    expect(token.endsWith(".")).toBe(true);
    await expectRejected(token, "forged-none");
  });

  it("alg none with the IdP's kid in the header", async () => {
    const header = base64url.encode(JSON.stringify({ alg: "none", kid: signingJwk.kid, typ: "JWT" }));
    const payload = base64url.encode(JSON.stringify(validClaims("forged-none-kid")));
    await expectRejected(`${header}.${payload}.`, "forged-none-kid");
  });

  it("HS256 keyed with the public JWK's JSON (algorithm confusion)", async () => {
    const secret = new TextEncoder().encode(JSON.stringify(publicJwk));
    const token = await signClaims(validClaims("forged-hs-json"), { alg: "HS256", key: secret });
    const detail = await expectRejected(token, "forged-hs-json");
    expect(detail).toMatch(/algorithm/i);
  });

  it("HS256 keyed with the public key's modulus bytes (algorithm confusion)", async () => {
    const modulus = base64url.decode(publicJwk.n);
    expect(modulus.length).toBeGreaterThanOrEqual(256);
    const token = await signClaims(validClaims("forged-hs-n"), { alg: "HS256", key: modulus });
    await expectRejected(token, "forged-hs-n");
  });

  it("a signature altered in one character", async () => {
    const [header, payload, signature] = (await accountToken("forged-sig")).split(".");
    await expectRejected(`${header}.${payload}.${tamper(signature!)}`, "forged-sig");
  });

  it("a payload altered after signing (the sub swapped, the signature kept)", async () => {
    const [header, , signature] = (await accountToken("honest-user")).split(".");
    const payload = base64url.encode(JSON.stringify(validClaims("forged-payload")));
    await expectRejected(`${header}.${payload}.${signature}`, "forged-payload");
  });

  it("signed by a different RSA key under the IdP's kid", async () => {
    const { privateKey } = await generateKeyPair("RS256");
    const token = await signClaims(validClaims("forged-other-key"), { key: privateKey });
    const detail = await expectRejected(token, "forged-other-key");
    expect(detail).toMatch(/signature/i);
  });

  it("signed by a different ES256 key under the IdP's kid (an allowed algorithm, but no such key)", async () => {
    const { privateKey } = await generateKeyPair("ES256");
    await expectRejected(await signClaims(validClaims("forged-es256"), { alg: "ES256", key: privateKey }), "forged-es256");
  });

  it("signed by the IdP's key but naming a kid the IdP does not publish", async () => {
    await expectRejected(await signClaims(validClaims("forged-kid"), { kid: "no-such-kid" }), "forged-kid");
  });

  it("a self-made key whose public half is embedded in the header (jwk header injection)", async () => {
    const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
    const jwk = await exportJWK(publicKey);
    const header = base64url.encode(JSON.stringify({ alg: "RS256", kid: signingJwk.kid, jwk }));
    const payload = base64url.encode(JSON.stringify(validClaims("forged-jwk-header")));
    const data = new TextEncoder().encode(`${header}.${payload}`);
    const sig = new Uint8Array(await crypto.subtle.sign("RSASSA-PKCS1-v1_5", privateKey, data));
    await expectRejected(`${header}.${payload}.${base64url.encode(sig)}`, "forged-jwk-header");
  });

  // The IdP's access tokens carry typ "at+jwt" (RFC 9068): an ID token, or any other JWT it signs, is not one.
  it.each([
    ["an ID token's", "JWT", /"typ" header is "JWT", not "at\+jwt"/],
    ["a logout token's", "logout+jwt", /"typ" header is "logout\+jwt", not "at\+jwt"/],
    ["no", null, /"typ" header is missing, not "at\+jwt"/],
  ])("%s typ header, signed by the IdP's key with valid claims", async (_, typ, why) => {
    const detail = await expectRejected(await signClaims(validClaims("forged-typ"), { typ }), "forged-typ");
    expect(detail).toMatch(why);
    expect(detail).toMatch(/access tokens only/);
  });

  it('typ "application/AT+JWT" is the same type (RFC 7515: the prefix may be given, case does not count)', async () => {
    const res = await call("GET", "/account", { token: await signClaims(validClaims("typ-with-prefix"), { typ: "application/AT+JWT" }) });
    expect(res.status).toBe(200);
  });

  it('IDP_TOKEN_TYPE "none" (an IdP whose tokens carry no typ): a token without one passes, one with a typ is 401', async () => {
    const config = { ...(readConfig(env) as Config), IDP_TOKEN_TYPE: "none" };
    expect((await verifyIdpToken(await signClaims(validClaims("untyped"), { typ: null }), config)).sub).toBe("untyped");
    const refused = await verifyIdpToken(await signClaims(validClaims("typed")), config).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 401, detail: expect.stringMatching(/"typ" header is "at\+jwt", not absent/) });
  });

  it("no exp claim", async () => {
    const { exp: _exp, ...claims } = validClaims("forged-no-exp");
    const detail = await expectRejected(await signClaims(claims), "forged-no-exp");
    expect(detail).toContain("exp");
  });

  it("no sub claim", async () => {
    const { sub: _sub, ...claims } = validClaims("unused");
    const before = await env.DB.prepare("SELECT count(*) AS n FROM accounts").first<{ n: number }>();
    const detail = await expectUnauthorized(await call("GET", "/api-keys", { token: await signClaims(claims) }), true);
    expect(detail).toContain("sub");
    const after = await env.DB.prepare("SELECT count(*) AS n FROM accounts").first<{ n: number }>();
    expect(after!.n).toBe(before!.n);
  });

  it("no iss claim", async () => {
    const { iss: _iss, ...claims } = validClaims("forged-no-iss");
    await expectRejected(await signClaims(claims), "forged-no-iss");
  });

  it("no aud claim", async () => {
    const { aud: _aud, ...claims } = validClaims("forged-no-aud");
    await expectRejected(await signClaims(claims), "forged-no-aud");
  });

  it("a sub over 255 characters", async () => {
    const sub = "s".repeat(256);
    await expectRejected(await accountToken(sub), sub);
  });

  // jose's `requiredClaims` checks only that `sub` is present; verifyIdpToken refuses an empty one (it would be the account "").
  it('an empty sub ("") is refused', async () => {
    const res = await call("GET", "/account", { token: await signClaims(validClaims("")) });
    expect(res.status).toBe(401);
  });

  // A non-string sub must not reach D1 as a bound value (a number would become the account "12345.0", an object a 500).
  it("a numeric sub is refused", async () => {
    const res = await call("GET", "/account", { token: await signClaims({ ...validClaims("x"), sub: 12345 as unknown as string }) });
    expect(res.status).toBe(401);
  });

  it("an object sub is refused with 401 (not a 500)", async () => {
    const res = await call("GET", "/account", { token: await signClaims({ ...validClaims("x"), sub: { id: "a" } as unknown as string }) });
    expect(res.status).toBe(401);
  });
});

describe("clock tolerance and accepted variants", () => {
  it("a token that expired only 30 s ago is accepted (60 s tolerance)", async () => {
    const token = await accountToken("expired-30s", { expiresIn: -30 });
    const account = await expectJson(await call("GET", "/account", { token }), 200);
    expect(account.id).toBe("expired-30s");
    expect(await expectJson(await call("GET", "/api-keys", { token }), 200)).toEqual({ api_keys: [] });
  });

  it("an aud array that includes this API is accepted", async () => {
    const token = await signClaims({ ...validClaims("aud-array"), aud: ["other-api", TEST_AUDIENCE] });
    expect((await expectJson(await call("GET", "/account", { token }), 200)).id).toBe("aud-array");
  });

  it("the control case: a well-formed token on GET /api-keys is 200", async () => {
    const token = await signClaims(validClaims("control-user"));
    expect(await expectJson(await call("GET", "/api-keys", { token }), 200)).toEqual({ api_keys: [] });
    expect(await accountExists("control-user")).toBe(true);
  });
});

describe("API keys on account-login and admin routes", () => {
  it("a real API key gets 403 naming API keys on every account and admin route", async () => {
    const login = await accountToken("key-owner");
    const created = await expectJson(await call("POST", "/api-keys", { token: login, body: { name: "server" } }), 201);
    const apiKey: string = created.key;
    expect(apiKey).toMatch(/^pda_live_/);

    const attempts: [string, string, unknown][] = [
      ["GET", "/api-keys", undefined],
      ["POST", "/api-keys", { name: "made by a key" }],
      ["PATCH", `/api-keys/${created.id}`, { name: "renamed by a key" }],
      ["DELETE", `/api-keys/${created.id}`, undefined],
      ["GET", "/account", undefined],
      ["PUT", "/admin/accounts/x/plan", { plan: "premium" }],
    ];
    for (const [method, path, body] of attempts) {
      const res = await call(method, path, { token: apiKey, body });
      const json = await expectJson<ApiError>(res, 403);
      expect(json).toEqual({ detail: expect.any(String) });
      expect(json.detail, `${method} ${path}`).toMatch(/API keys?/);
      expect(res.headers.get("X-Request-Id")).toBeTruthy();
    }

    // None of those did anything: still one key, active, with its name; no account "x".
    const listed = await expectJson(await call("GET", "/api-keys", { token: login }), 200);
    expect(listed.api_keys).toHaveLength(1);
    expect(listed.api_keys[0]).toMatchObject({ id: created.id, name: "server", status: "active" });
    expect(await accountExists("x")).toBe(false);
  });
});

describe("PUT /admin/accounts/:id/plan", () => {
  it("without a token: 401", async () => {
    await expectUnauthorized(await call("PUT", "/admin/accounts/someone/plan", { body: { plan: "premium" } }), false);
  });

  it("a normal account token without scope: 403", async () => {
    const res = await call("PUT", "/admin/accounts/target-1/plan", { token: await accountToken("plain-user"), body: { plan: "premium" } });
    expect((await expectJson(res, 403)).detail).toContain("accounts:write");
    expect(await accountExists("target-1")).toBe(false);
  });

  it("a token with only prices:write: 403", async () => {
    const res = await call("PUT", "/admin/accounts/target-2/plan", {
      token: await adminToken("price-bot", "prices:write"),
      body: { plan: "premium" },
    });
    expect((await expectJson(res, 403)).detail).toContain("accounts:write");
    expect(await accountExists("target-2")).toBe(false);
  });

  it("scopes are matched whole, not as substrings", async () => {
    for (const scope of ["accounts:writer", "xaccounts:write", "accounts:write:all", "accounts", "ACCOUNTS:WRITE"]) {
      const res = await call("PUT", "/admin/accounts/target-3/plan", {
        token: await adminToken("sneaky", scope),
        body: { plan: "premium" },
      });
      await expectJson(res, 403);
    }
    expect(await accountExists("target-3")).toBe(false);
  });

  it("an admin token that is expired is 401, not 403", async () => {
    const token = await signClaims({ ...validClaims("old-admin"), scope: "accounts:write", exp: nowSeconds() - 600 });
    await expectUnauthorized(await call("PUT", "/admin/accounts/target-4/plan", { token, body: { plan: "premium" } }), true);
  });

  it("with accounts:write: 200, the new account on premium with its limits; GET /account then shows it", async () => {
    const res = await call("PUT", "/admin/accounts/acct-premium/plan", {
      token: await adminToken("ops", "accounts:write"),
      body: { plan: "premium" },
    });
    const account = await expectJson(res, 200);
    expect(account).toEqual({
      id: "acct-premium",
      plan: "premium",
      limits: { per_minute: 300, per_hour: 18_000, per_day: 432_000 },
      created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/),
    });

    const seen = await expectJson(await call("GET", "/account", { token: await accountToken("acct-premium") }), 200);
    expect(seen).toEqual(account);
  });

  it("changing an existing account's plan keeps its created_at, and downgrades work too", async () => {
    const own = await accountToken("acct-upgrade");
    const first = await expectJson(await call("GET", "/account", { token: own }), 200);
    expect(first.plan).toBe("free");

    const admin = await adminToken();
    const standard = await expectJson(
      await call("PUT", "/admin/accounts/acct-upgrade/plan", { token: admin, body: { plan: "standard" } }),
      200,
    );
    expect(standard).toEqual({ ...first, plan: "standard", limits: { per_minute: 60, per_hour: 3_600, per_day: 86_400 } });
    expect(await expectJson(await call("GET", "/account", { token: own }), 200)).toEqual(standard);

    const free = await expectJson(await call("PUT", "/admin/accounts/acct-upgrade/plan", { token: admin, body: { plan: "free" } }), 200);
    expect(free).toEqual(first);
  });

  it("an unknown plan: 400 naming the field, and nothing changes", async () => {
    const admin = await adminToken();
    await expectJson(await call("PUT", "/admin/accounts/acct-bad-plan/plan", { token: admin, body: { plan: "standard" } }), 200);
    for (const body of [{ plan: "gold" }, { plan: "PREMIUM" }, { plan: null }, {}, { plan: "premium", extra: 1 }]) {
      const res = await call("PUT", "/admin/accounts/acct-bad-plan/plan", { token: admin, body });
      const json = await expectJson(res, 400);
      expect(json.detail, JSON.stringify(body)).toContain("extra" in body ? "extra" : "plan");
    }
    const seen = await expectJson(await call("GET", "/account", { token: await accountToken("acct-bad-plan") }), 200);
    expect(seen.plan).toBe("standard");
  });
});
