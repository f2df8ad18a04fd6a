import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env.ts";
import { database } from "../db/client.ts";
import type { Config } from "../env.ts";
import { ApiError } from "../errors.ts";
import { ensureAccount } from "../services/accounts.ts";
import { hashApiKey, isWellFormedApiKey, looksLikeApiKey } from "./api-key.ts";
import { unauthorized, verifyIdpToken, type Identity } from "./idp.ts";

/**
 * What the request's `Authorization` header turned out to be. Worked out once, before admission,
 * because the credential picks the rate-limit bucket; routes then say which kind they need.
 */
export type Credential =
  | { kind: "none" }
  | { kind: "api-key"; keyHash: string; key?: { id: string; accountId: string } }
  | { kind: "login"; identity: Identity }
  | { kind: "rejected"; error: ApiError; wasApiKey: boolean };

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  if (!match) throw unauthorized('The Authorization header must be "Bearer <token>".', true);
  return match[1];
}

/** Checks what can be checked without the rate limiter: a key's format and checksum, a JWT's signature and claims. */
export async function identify(header: string | undefined, config: Config | undefined): Promise<Credential> {
  let wasApiKey = false;
  try {
    const token = bearerToken(header);
    if (token === undefined) return { kind: "none" };
    const prefix = config?.KEY_PREFIX ?? "pda";
    wasApiKey = looksLikeApiKey(token, prefix);
    if (wasApiKey) {
      if (!isWellFormedApiKey(token, prefix)) throw unauthorized("The API key is malformed; check that it was copied whole.", true);
      return { kind: "api-key", keyHash: await hashApiKey(token) };
    }
    if (!config) throw new ApiError(500, "Server misconfigured.");
    return { kind: "login", identity: await verifyIdpToken(token, config) };
  } catch (error) {
    if (error instanceof ApiError) return { kind: "rejected", error, wasApiKey };
    throw error;
  }
}

const noCredential = (what: string) => unauthorized(`Send ${what} as Authorization: Bearer <token>.`, false);

function requireLogin(c: Context<AppEnv>): Identity {
  const credential = c.var.credential;
  if (credential.kind === "api-key" || (credential.kind === "rejected" && credential.wasApiKey)) {
    throw new ApiError(403, "API keys cannot manage keys or accounts; use your account login (a JWT from the identity provider).");
  }
  if (credential.kind === "rejected") throw credential.error;
  if (credential.kind === "none") throw noCredential("your account login (a JWT from the identity provider)");
  return credential.identity;
}

/** Account login: a valid IdP JWT; its `sub` names the account, created on first sight. */
export const requireAccount: MiddlewareHandler<AppEnv> = async (c, next) => {
  const identity = requireLogin(c);
  c.set("account", await ensureAccount(database(c.env.DB, c.var.work), identity.sub));
  await next();
};

/** Admin: a valid IdP JWT whose `scope` claim holds `scope`. */
export const requireScope =
  (scope: string): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    if (!requireLogin(c).scopes.has(scope)) throw new ApiError(403, `This route needs the "${scope}" scope, which your token does not hold.`);
    await next();
  };

/** Data routes: an active API key (the rate limiter has already confirmed it). */
export const requireApiKey: MiddlewareHandler<AppEnv> = async (c, next) => {
  const credential = c.var.credential;
  if (credential.kind === "rejected") throw credential.error;
  if (credential.kind === "login") throw unauthorized("This route needs an API key, not an account login.", true);
  if (credential.kind === "none" || !credential.key) throw noCredential("your API key");
  c.set("apiKey", credential.key);
  await next();
};
