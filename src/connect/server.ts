import { OAuthAuthorizationServer, type OAuthHelpers } from "@cloudflare/workers-oauth-provider";
import { KEY_SCOPES, type KeyScope } from "../api-keys/scopes.ts";
import { ApiError } from "../http/errors.ts";
import { remember } from "../platform/bounded-map.ts";
import { isolateMap } from "../platform/isolate-memory.ts";
import { logger } from "../platform/log.ts";

/**
 * One-click connect: this service is the OAuth 2.1 authorisation server of its one protected resource, /mcp
 * (@cloudflare/workers-oauth-provider's OAuthAuthorizationServer: dynamic client registration, authorisation code with
 * S256 PKCE only, rotating refresh tokens, its records in OAUTH_KV). The library's host for a resource server is not
 * used: /mcp stays behind the app's admission, which turns a token into its connector key (src/pipeline/admission.ts),
 * so the key's limits, scopes and revocation apply to it exactly as to an API key.
 */

export const MCP_PATH = "/mcp";
export const isMcpPath = (path: string) => path === MCP_PATH || path === `${MCP_PATH}/`;
const AUTHORIZE_PATH = "/oauth/authorize";
const TOKEN_PATH = "/oauth/token";
const REGISTER_PATH = "/oauth/register";
/** RFC 9728's document for /mcp; also served at the bare well-known path, which the contract names and `WWW-Authenticate` points to. */
const RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource";

/** What a connector key may be granted: a live key's scopes (changing a sandbox is a test key's). */
export const CONNECTOR_SCOPES = KEY_SCOPES.filter((scope): scope is Exclude<KeyScope, "sandbox:write"> => scope !== "sandbox:write");

/** An access token lives an hour, a grant's refresh tokens 30 days; each refresh hands out a new refresh token. */
const ACCESS_TOKEN_SECONDS = 3600;
const REFRESH_TOKEN_SECONDS = 30 * 24 * 3600;

/** What a grant's props hold (the library encrypts them with a key only the grant's tokens unwrap): the key it acts as. */
export interface ConnectorProps {
  keyHash: string;
}

/** The one binding the library reads; the request's meter counts its operations (src/platform/metered.ts). */
export interface OAuthEnv {
  OAUTH_KV: KVNamespace;
}

const log = logger("connect");

/**
 * The authorisation server of one origin (its issuer is the origin the request came to, and its resource that
 * origin's /mcp), built once per isolate and origin. OAuth needs https (http only on a loopback host, for
 * `npm run dev`): another origin hears so.
 */
const servers = isolateMap<string, OAuthAuthorizationServer<OAuthEnv>>();
export function authorizationServer(origin: string): OAuthAuthorizationServer<OAuthEnv> {
  const known = servers.get(origin);
  if (known) return known;
  let server: OAuthAuthorizationServer<OAuthEnv>;
  try {
    server = new OAuthAuthorizationServer<OAuthEnv>({
      issuer: origin,
      resources: [`${origin}${MCP_PATH}`],
      authorizeEndpoint: AUTHORIZE_PATH,
      tokenEndpoint: TOKEN_PATH,
      clientRegistrationEndpoint: REGISTER_PATH,
      scopesSupported: [...CONNECTOR_SCOPES],
      accessTokenTTL: ACCESS_TOKEN_SECONDS,
      refreshTokenTTL: REFRESH_TOKEN_SECONDS,
      // The client hears what went wrong in the answer; a line at info level says it here without alarming anyone.
      onError: ({ status, code, description }) => log.info("OAuth error answered", { status, code, description }),
    });
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    throw new ApiError(404, `One-click connect (OAuth) is served over https only, not at ${origin}.`);
  }
  remember(servers, origin, server);
  return server;
}

export const oauthHelpers = (origin: string, kv: KVNamespace): OAuthHelpers => authorizationServer(origin).getOAuthApi({ OAUTH_KV: kv });

/** The resource metadata's address, as a 401 from /mcp names it. */
export const resourceMetadataUrl = (origin: string) => `${origin}${RESOURCE_METADATA_PATH}`;

/**
 * The library's tokens are `<user>:<grant>:<secret>`, and a grant's user is its connector key's id (`key_` + 32 hex):
 * nothing else a client sends has that shape (an API key has no colon, nor has a JWT).
 */
export const isConnectorToken = (token: string) => /^key_[0-9a-f]{32}:[^:]+:[^:]+$/.test(token);

/**
 * The tokens this isolate has resolved, to their key's hash, until they expire: a token's key never changes, and a
 * revoked key is refused by its object on the very next request whatever is remembered here, so an agent's steady
 * requests read no KV.
 */
const resolved = isolateMap<string, { keyHash: string; expiresAtMs: number }>();

/** Whether this isolate has resolved the token (and it has not expired): its next request reads no KV. */
export const isKnownConnectorToken = (token: string) => (resolved.get(token)?.expiresAtMs ?? 0) > Date.now();

/** The connector key an access token for this origin's /mcp acts as, or undefined for a token that is not (or no longer) one. */
export async function connectorKeyOf(origin: string, token: string, kv: KVNamespace): Promise<string | undefined> {
  const known = resolved.get(token);
  if (known && Date.now() < known.expiresAtMs) return known.keyHash;
  const validated = await authorizationServer(origin).validateToken(`${origin}${MCP_PATH}`, token, { OAUTH_KV: kv });
  const keyHash = (validated?.props as ConnectorProps | undefined)?.keyHash;
  if (!validated || typeof keyHash !== "string") return undefined;
  remember(resolved, token, { keyHash, expiresAtMs: validated.expiresAt * 1000 });
  return keyHash;
}
