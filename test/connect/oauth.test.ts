import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import {
  AgentProvider,
  answerConsent,
  authorizeUrl,
  connect,
  ORIGIN,
  openConsent,
  pkcePair,
  REDIRECT_URI,
  redeemCode,
  refresh,
  registerClient,
  type Tokens,
  workerFetch,
} from "../helpers/connect.ts";
import { call, expectJson, randomTestIp } from "../helpers/http.ts";
import { postMcp } from "../helpers/mcp.ts";

/**
 * One-click connect (contract, fifth wave: "Agents that are told"): an AI client connects to /mcp by OAuth 2.1 (dynamic
 * registration, authorisation code with S256 PKCE, rotating refresh tokens), its user consenting on the dashboard
 * with their account login, and each grant is a connector key of the account. Everything runs in the real worker, its
 * D1, its keys' objects and its OAUTH_KV; the IdP's sign-in is the test's (its access token minted with the test IdP's
 * key, test/helpers/tokens.ts), as every login test does.
 */

const RESOURCE_METADATA = `resource_metadata="${ORIGIN}/.well-known/oauth-protected-resource"`;
const listTools = { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} };

afterEach(() => vi.useRealTimers());

describe("metadata", () => {
  it("publishes the protected resource's metadata at the well-known path, and at its /mcp form", async () => {
    for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]) {
      const res = await workerFetch(`${ORIGIN}${path}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        resource: `${ORIGIN}/mcp`,
        authorization_servers: [ORIGIN],
        scopes_supported: ["products:read", "history:read", "events:read"],
        bearer_methods_supported: ["header"],
        resource_name: "Price Data API (Model Context Protocol)",
      });
    }
  });

  it("publishes the authorisation server's metadata: registration, S256 only, code and refresh grants", async () => {
    const res = await workerFetch(`${ORIGIN}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      issuer: ORIGIN,
      authorization_endpoint: `${ORIGIN}/oauth/authorize`,
      token_endpoint: `${ORIGIN}/oauth/token`,
      registration_endpoint: `${ORIGIN}/oauth/register`,
      code_challenge_methods_supported: ["S256"],
      response_types_supported: ["code"],
      grant_types_supported: ["authorization_code", "refresh_token"],
      scopes_supported: ["products:read", "history:read", "events:read"],
    });
  });

  it("answers a refusal of /mcp with a Bearer challenge naming the resource metadata; other routes' challenges are unchanged", async () => {
    const none = await workerFetch(`${ORIGIN}/mcp`, { method: "POST", body: JSON.stringify(listTools) });
    expect(none.status).toBe(401);
    expect(none.headers.get("WWW-Authenticate")).toBe(`Bearer realm="price-data-api", ${RESOURCE_METADATA}`);
    const forged = await postMcp(`key_${"ab".repeat(16)}:grant:${"x".repeat(32)}`, listTools);
    expect(forged.status).toBe(401);
    expect(forged.headers.get("WWW-Authenticate")).toBe(`Bearer realm="price-data-api", error="invalid_token", ${RESOURCE_METADATA}`);
    const products = await call("GET", "/products");
    expect(products.headers.get("WWW-Authenticate")).toBe('Bearer realm="price-data-api"');
  });
});

describe("registration and authorisation", () => {
  it("registers a client dynamically", async () => {
    expect(await registerClient("Cursor")).toMatch(/.+/);
  });

  it("refuses a request without S256 PKCE back at the client's redirect URI, before any consent", async () => {
    const clientId = await registerClient();
    const plain = authorizeUrl(clientId, "a".repeat(43), { code_challenge_method: "plain" });
    const res = await workerFetch(plain, { redirect: "manual" });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.get("Location")!);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT_URI);
    expect(back.searchParams.get("error")).toBe("invalid_request");
  });

  it("says so itself, never redirecting, when the redirect URI is not the client's", async () => {
    const clientId = await registerClient();
    const res = await workerFetch(authorizeUrl(clientId, "a".repeat(43), { redirect_uri: "https://attacker.example/cb" }), {
      redirect: "manual",
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/authorisation request cannot be answered/);
  });

  it("shows the consent to the signed-in account holder, and takes the answer only from the browser the handle is bound to", async () => {
    const alice = await freshAccount();
    const clientId = await registerClient("Claude Desktop");
    const { challenge } = await pkcePair();
    const consent = await openConsent(authorizeUrl(clientId, challenge, { scope: "products:read events:read" }));
    const shown = await expectJson(await call("GET", `/oauth/consents/${encodeURIComponent(consent.handle)}`, { token: alice.token }), 200);
    expect(shown).toEqual({
      client_name: "Claude Desktop",
      redirect_host: "127.0.0.1",
      redirect_is_loopback: true,
      requested_scopes: ["products:read", "events:read"],
      scopes: ["products:read", "history:read", "events:read"],
    });
    // No login: 401; another browser (no binding cookie): 403, and nothing is made.
    expect((await call("POST", `/oauth/consents/${encodeURIComponent(consent.handle)}`, { body: { allow: true } })).status).toBe(401);
    const elsewhere = await call("POST", `/oauth/consents/${encodeURIComponent(consent.handle)}`, {
      token: alice.token,
      body: { allow: true },
    });
    expect(elsewhere.status).toBe(403);
    const keys = await expectJson(await call("GET", "/api-keys", { token: alice.token }), 200);
    expect(keys.api_keys.map((key) => key.kind)).toEqual(["api_key"]);
  });

  it("sends a refusal back to the client as access_denied, and makes no key", async () => {
    const alice = await freshAccount();
    const clientId = await registerClient();
    const { challenge } = await pkcePair();
    const consent = await openConsent(authorizeUrl(clientId, challenge));
    const outcome = await answerConsent(alice.token, consent, { allow: false });
    expect(outcome.key_id).toBeNull();
    expect(new URL(outcome.redirect_to).searchParams.get("error")).toBe("access_denied");
    const keys = await expectJson(await call("GET", "/api-keys", { token: alice.token }), 200);
    expect(keys.api_keys).toHaveLength(1);
    // The handle worked once.
    expect((await call("GET", `/oauth/consents/${encodeURIComponent(consent.handle)}`, { token: alice.token })).status).toBe(404);
  });

  it("redeems a code only with its PKCE verifier, once", async () => {
    const alice = await freshAccount();
    const clientId = await registerClient();
    const { verifier, challenge } = await pkcePair();
    const outcome = await answerConsent(alice.token, await openConsent(authorizeUrl(clientId, challenge)));
    const code = new URL(outcome.redirect_to).searchParams.get("code")!;
    const wrong = await redeemCode(clientId, code, (await pkcePair()).verifier);
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({ error: "invalid_grant" });
    expect((await redeemCode(clientId, code, verifier)).status).toBe(200);
    expect((await redeemCode(clientId, code, verifier)).status).toBe(400);
  });
});

describe("a grant is a connector key", () => {
  it("lists the grant in GET /api-keys as a connector key named after its client, with the scopes chosen at consent", async () => {
    const alice = await freshAccount();
    const { keyId, tokens } = await connect(alice.token, { clientName: "Claude Desktop", scopes: ["products:read", "history:read"] });
    expect(tokens).toMatchObject({ token_type: "bearer", scope: "products:read history:read" });
    const keys = await expectJson(await call("GET", "/api-keys", { token: alice.token }), 200);
    const connector = keys.api_keys.find((key) => key.id === keyId);
    expect(connector).toMatchObject({ kind: "connector", name: "Claude Desktop", environment: "live", status: "active" });
    expect(connector?.scopes).toEqual(["products:read", "history:read"]);
    expect(keys.api_keys.find((key) => key.id === alice.keyId)?.kind).toBe("api_key");
    // A connector is not rotated (its tokens rotate); it is revoked.
    expect((await call("POST", `/api-keys/${keyId}/rotate`, { token: alice.token, body: {} })).status).toBe(409);
  });

  it("lets the access token call /mcp as its key, with the key's scopes; API keys keep working there", async () => {
    const alice = await freshAccount();
    const { tokens } = await connect(alice.token, { scopes: ["history:read"] });
    const listed = await postMcp(tokens.access_token, listTools);
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { result: { tools: unknown[] } }).result.tools.length).toBeGreaterThan(0);
    // products:read was not granted: the tool says so, as for an API key without it.
    const search = await postMcp(tokens.access_token, {
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "search_products", arguments: { query: "sony" } },
    });
    expect(JSON.stringify(await search.json())).toMatch(/lacks the products:read scope/);
    expect((await postMcp(alice.key, listTools)).status).toBe(200);
    // The token is for /mcp only.
    const elsewhere = await call("GET", "/products", { token: tokens.access_token });
    expect(elsewhere.status).toBe(401);
    expect((await expectJson(elsewhere, 401)).detail).toMatch(/for \/mcp only/);
  });

  it("holds the token to the account's plan limits: 429 after the free plan's 10 a minute", async () => {
    const alice = await freshAccount({ plan: "free" });
    const { tokens } = await connect(alice.token);
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await postMcp(tokens.access_token, listTools)).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(200));
    expect(statuses[10]).toBe(429);
  });

  it("ends the token on the very next request when its key is revoked, and its refresh token with it", async () => {
    const alice = await freshAccount();
    const { clientId, keyId, tokens } = await connect(alice.token);
    expect((await postMcp(tokens.access_token, listTools)).status).toBe(200);
    await expectJson(await call("DELETE", `/api-keys/${keyId}`, { token: alice.token }), 200);
    const next = await postMcp(tokens.access_token, listTools);
    expect(next.status).toBe(401);
    expect(next.headers.get("WWW-Authenticate")).toContain(RESOURCE_METADATA);
    const refreshed = await refresh(clientId, tokens.refresh_token);
    expect(refreshed.status).toBe(400);
    expect(await refreshed.json()).toMatchObject({ error: "invalid_grant" });
  });

  it("rotates refresh tokens: each refresh gives a new one, and the one before the last stops working", async () => {
    const alice = await freshAccount({ plan: "standard" });
    const { clientId, tokens: first } = await connect(alice.token);
    const second = (await (await refresh(clientId, first.refresh_token)).json()) as Tokens;
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.access_token).not.toBe(first.access_token);
    expect((await postMcp(second.access_token, listTools)).status).toBe(200);
    const third = (await (await refresh(clientId, second.refresh_token)).json()) as Tokens;
    expect(third.refresh_token).not.toBe(second.refresh_token);
    const stale = await refresh(clientId, first.refresh_token);
    expect(stale.status).toBe(400);
    expect(await stale.json()).toMatchObject({ error: "invalid_grant" });
    expect((await postMcp(third.access_token, listTools)).status).toBe(200);
  });

  it("refuses a forged token and an expired one (401)", async () => {
    const alice = await freshAccount();
    const { tokens } = await connect(alice.token);
    const [keyId, grantId] = tokens.access_token.split(":");
    const forged = await postMcp(`${keyId}:${grantId}:${"A".repeat(32)}`, listTools);
    expect(forged.status).toBe(401);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2 * 3600 * 1000); // the access token lives an hour
    const expired = await postMcp(tokens.access_token, listTools);
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as { detail: string }).detail).toMatch(/unknown, expired or ended/);
  });

  it("counts made-up tokens in the client IP's bucket: 30 a minute, then 429", async () => {
    const ip = randomTestIp();
    const statuses: number[] = [];
    for (let i = 0; i < 32; i++) {
      const forged = `key_${"cd".repeat(16)}:grant${i}:${"y".repeat(32)}`;
      const res = await workerFetch(`${ORIGIN}/mcp`, {
        method: "POST",
        headers: { Authorization: `Bearer ${forged}`, "CF-Connecting-IP": ip, "Content-Type": "application/json" },
        body: JSON.stringify(listTools),
      });
      statuses.push(res.status);
    }
    expect(statuses.slice(0, 30)).toEqual(Array(30).fill(401));
    expect(statuses.slice(30)).toEqual([429, 429]);
  });

  it("keeps one account's connector key from another: its id is 404 to them", async () => {
    const alice = await freshAccount();
    const bob = await freshAccount();
    const { keyId, tokens } = await connect(alice.token);
    for (const [method, path] of [
      ["DELETE", `/api-keys/${keyId}`],
      ["PATCH", `/api-keys/${keyId}`],
      ["GET", `/api-keys/${keyId}/usage`],
    ] as const) {
      const res = await call(method, path, { token: bob.token, ...(method === "PATCH" && { body: { name: "mine" } }) });
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    const bobs = await expectJson(await call("GET", "/api-keys", { token: bob.token }), 200);
    expect(bobs.api_keys.map((key) => key.id)).not.toContain(keyId);
    expect((await postMcp(tokens.access_token, listTools)).status).toBe(200);
  });
});

describe("the MCP SDK's client", () => {
  it("connects with OAuth from a 401, its user consents, and it lists the tools; revoked, its next call is 401", async () => {
    const alice = await freshAccount();
    const provider = new AgentProvider();
    const transport = () => new StreamableHTTPClientTransport(new URL(`${ORIGIN}/mcp`), { authProvider: provider, fetch: workerFetch });
    const first = transport();
    await expect(new Client({ name: "agent", version: "1.0.0" }).connect(first)).rejects.toThrow(UnauthorizedError);
    // What the user's browser does with the URL the client opened: the dashboard's consent, signed in.
    expect(provider.authorizationUrl?.searchParams.get("code_challenge_method")).toBe("S256");
    const outcome = await answerConsent(alice.token, await openConsent(provider.authorizationUrl!));
    await first.finishAuth(new URL(outcome.redirect_to).searchParams.get("code")!);

    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(transport());
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain("search_products");

    const keys = await expectJson(await call("GET", "/api-keys", { token: alice.token }), 200);
    expect(keys.api_keys.find((key) => key.id === outcome.key_id)).toMatchObject({ kind: "connector", name: "Agent under test" });
    await expectJson(await call("DELETE", `/api-keys/${outcome.key_id}`, { token: alice.token }), 200);
    const refused = await postMcp(provider.tokens()!.access_token, listTools);
    expect(refused.status).toBe(401);
    await client.close();
  });
});
