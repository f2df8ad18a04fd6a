import { exports } from "cloudflare:workers";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { expect } from "vitest";
import { call, expectJson, randomTestIp } from "./http.ts";

/**
 * One-click connect as an AI client and its user's browser do it, through the worker's real fetch handler: dynamic
 * registration, the authorisation request with S256 PKCE, the dashboard's consent answered with the account login (the
 * IdP's sign-in is the test's: its token is minted as test/helpers/tokens.ts mints every login), the code redeemed.
 */

export const ORIGIN = "https://api.test";
/** A native client's loopback redirect, as Claude Desktop or an MCP inspector registers. */
export const REDIRECT_URI = "http://127.0.0.1:33418/callback";

/** A request to the worker from a client address of its own. */
export function workerFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const request = new Request(input, init);
  if (!request.headers.has("CF-Connecting-IP")) request.headers.set("CF-Connecting-IP", randomTestIp());
  return exports.default.fetch(request);
}

const form = (fields: Record<string, string>) => ({
  method: "POST",
  headers: { "Content-Type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams(fields).toString(),
});

export async function registerClient(clientName = "Claude Desktop"): Promise<string> {
  const res = await workerFetch(`${ORIGIN}/oauth/register`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      client_name: clientName,
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

const base64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");

export async function pkcePair(): Promise<{ verifier: string; challenge: string }> {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
  return { verifier, challenge };
}

export function authorizeUrl(clientId: string, challenge: string, extra: Record<string, string> = {}): string {
  const query = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    code_challenge: challenge,
    code_challenge_method: "S256",
    state: crypto.randomUUID(),
    resource: `${ORIGIN}/mcp`,
    ...extra,
  });
  return `${ORIGIN}/oauth/authorize?${query}`;
}

/** The browser's visit to the authorisation URL: the consent's handle, and the cookie that binds it to this browser. */
export async function openConsent(url: string | URL): Promise<{ handle: string; cookie: string }> {
  const res = await workerFetch(url, { redirect: "manual" });
  expect(res.status, await res.clone().text()).toBe(302);
  const location = res.headers.get("Location") ?? "";
  expect(location).toMatch(/^\/dashboard\/#connect=/);
  const handle = decodeURIComponent(location.slice("/dashboard/#connect=".length));
  const cookie = res.headers
    .getSetCookie()
    .map((set) => set.split(";")[0])
    .join("; ");
  return { handle, cookie };
}

/** The account holder's answer on the dashboard, signed in with `login`; the browser's next address. */
export async function answerConsent(
  login: string,
  { handle, cookie }: { handle: string; cookie: string },
  answer: { allow: boolean; scopes?: string[] } = { allow: true },
) {
  const res = await call("POST", `/oauth/consents/${encodeURIComponent(handle)}`, {
    token: login,
    body: answer,
    headers: { Cookie: cookie },
  });
  return expectJson(res, 200);
}

export interface Tokens {
  access_token: string;
  refresh_token: string;
  token_type: string;
  expires_in: number;
  scope: string;
}

/** A token request as a client sends it: its address and what to send. */
const tokenRequest = (fields: Record<string, string>): [string, RequestInit] => [`${ORIGIN}/oauth/token`, form(fields)];

export const codeRedemption = (clientId: string, code: string, verifier: string) =>
  tokenRequest({
    grant_type: "authorization_code",
    code,
    redirect_uri: REDIRECT_URI,
    client_id: clientId,
    code_verifier: verifier,
    resource: `${ORIGIN}/mcp`,
  });

export const redeemCode = (clientId: string, code: string, verifier: string) => workerFetch(...codeRedemption(clientId, code, verifier));

export const refreshRequest = (clientId: string, refreshToken: string) =>
  tokenRequest({ grant_type: "refresh_token", refresh_token: refreshToken, client_id: clientId });

export const refresh = (clientId: string, refreshToken: string) => workerFetch(...refreshRequest(clientId, refreshToken));

/** A client registered and its authorisation request made, up to the code its user's consent gives it. */
export async function codeFor(login: string) {
  const clientId = await registerClient();
  const { verifier, challenge } = await pkcePair();
  const outcome = await answerConsent(login, await openConsent(authorizeUrl(clientId, challenge)));
  return { clientId, verifier, code: new URL(outcome.redirect_to).searchParams.get("code")! };
}

/** A whole connection for the account whose login is `login`: its client, its tokens and its connector key's id. */
export async function connect(login: string, { clientName = "Claude Desktop", scopes }: { clientName?: string; scopes?: string[] } = {}) {
  const clientId = await registerClient(clientName);
  const { verifier, challenge } = await pkcePair();
  const consent = await openConsent(authorizeUrl(clientId, challenge));
  const outcome = await answerConsent(login, consent, { allow: true, ...(scopes && { scopes }) });
  const code = new URL(outcome.redirect_to).searchParams.get("code");
  expect(code).toBeTruthy();
  const res = await redeemCode(clientId, code!, verifier);
  expect(res.status, await res.clone().text()).toBe(200);
  return { clientId, keyId: outcome.key_id!, tokens: (await res.json()) as Tokens };
}

/** The MCP TypeScript SDK's own OAuth client, as an agent builder wires it: the "browser" step is the test's. */
export class AgentProvider implements OAuthClientProvider {
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = "";
  authorizationUrl: URL | undefined;

  get redirectUrl() {
    return REDIRECT_URI;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "Agent under test",
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.#client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.#client = info;
  }
  tokens() {
    return this.#tokens;
  }
  saveTokens(tokens: OAuthTokens) {
    this.#tokens = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.#verifier = verifier;
  }
  codeVerifier() {
    return this.#verifier;
  }
}
