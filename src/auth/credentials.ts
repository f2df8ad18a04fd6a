import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env.ts";
import { database } from "../db/client.ts";
import { ApiError } from "../errors.ts";
import { ensureAccount } from "../services/accounts.ts";
import { findApiKeyByHash } from "../services/api-keys.ts";
import { hashApiKey, isWellFormedApiKey, looksLikeApiKey } from "./api-key.ts";
import { unauthorized, verifyIdpToken } from "./idp.ts";

/** The token of `Authorization: Bearer <token>`, or undefined when there is none. */
export function bearerToken(c: Context): string | undefined {
  const header = c.req.header("Authorization");
  if (!header) return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  if (!match) throw unauthorized('The Authorization header must be "Bearer <token>".', true);
  return match[1];
}

async function verifyLogin(c: Context<AppEnv>) {
  const token = bearerToken(c);
  if (token === undefined) throw unauthorized("Sign in: send your account login as Authorization: Bearer <JWT>.", false);
  if (looksLikeApiKey(token, c.var.config.KEY_PREFIX)) {
    throw new ApiError(403, "API keys cannot manage keys or accounts; use your account login (a JWT from the identity provider).");
  }
  const identity = await verifyIdpToken(token, c.var.config);
  c.set("identity", identity);
  return identity;
}

/** Account login: a valid IdP JWT; its `sub` names the account, created on first sight. */
export const requireAccount: MiddlewareHandler<AppEnv> = async (c, next) => {
  const identity = await verifyLogin(c);
  c.set("account", await ensureAccount(database(c.env.DB), identity.sub));
  await next();
};

/** Admin: a valid IdP JWT whose `scope` claim holds `scope`. */
export const requireScope =
  (scope: string): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const identity = await verifyLogin(c);
    if (!identity.scopes.has(scope)) throw new ApiError(403, `This route needs the "${scope}" scope, which your token does not hold.`);
    await next();
  };

/**
 * Data routes: an active API key. Interim version that asks D1; the rate-limit issue moves this
 * into the per-key Durable Object. Sets `apiKey` (its id and account) on the context.
 */
export const requireApiKey: MiddlewareHandler<AppEnv> = async (c, next) => {
  const token = bearerToken(c);
  if (token === undefined) throw unauthorized("Send your API key as Authorization: Bearer <API_KEY>.", false);
  const prefix = c.var.config.KEY_PREFIX;
  if (!looksLikeApiKey(token, prefix)) throw unauthorized("This route needs an API key, not an account login.", true);
  if (!isWellFormedApiKey(token, prefix)) throw unauthorized("The API key is malformed; check that it was copied whole.", true);
  const key = await findApiKeyByHash(database(c.env.DB), await hashApiKey(token));
  if (!key || key.status !== "active") throw unauthorized("The API key is unknown or revoked.", true);
  c.set("apiKey", { id: key.id, accountId: key.accountId });
  await next();
};
