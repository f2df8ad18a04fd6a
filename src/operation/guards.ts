import { eq } from "drizzle-orm";
import type { Context, MiddlewareHandler } from "hono";
import { type Identity, unauthorized } from "../auth/idp.ts";
import type { AppEnv } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { type AccountRow, accounts } from "../platform/tables.ts";

/** The route middlewares that say which credential a route needs, from what src/pipeline/identify.ts found. */

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

/** The account for an IdP subject, created on the Free plan the first time the subject is seen. */
async function ensureAccount(db: Database, id: string): Promise<AccountRow> {
  const existing = await db.select().from(accounts).where(eq(accounts.id, id)).get();
  if (existing) return existing;
  await db.insert(accounts).values({ id }).onConflictDoNothing();
  return (await db.select().from(accounts).where(eq(accounts.id, id)).get())!;
}

/** Account login: a valid IdP JWT; its `sub` names the account, created on first sight. */
export const requireAccount: MiddlewareHandler<AppEnv> = async (c, next) => {
  const identity = requireLogin(c);
  c.set("account", await ensureAccount(c.var.services.db, identity.sub));
  await next();
};

/** Admin: a valid IdP JWT whose `scope` claim holds `scope`. */
export const requireScope =
  (scope: string): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    if (!requireLogin(c).scopes.has(scope))
      throw new ApiError(403, `This route needs the "${scope}" scope, which your token does not hold.`);
    await next();
  };

/** Data routes: an active API key (its object has already admitted it). */
export const requireApiKey: MiddlewareHandler<AppEnv> = async (c, next) => {
  const credential = c.var.credential;
  if (credential.kind === "rejected") throw credential.error;
  if (credential.kind === "login") throw unauthorized("This route needs an API key, not an account login.", true);
  if (credential.kind === "none" || !credential.key) throw noCredential("your API key");
  c.set("apiKey", credential.key);
  await next();
};
