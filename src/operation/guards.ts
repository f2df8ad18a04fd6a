import { eq } from "drizzle-orm";
import type { Context, MiddlewareHandler } from "hono";
import { unauthorized } from "../auth/idp.ts";
import type { AppEnv } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import type { Credential } from "../pipeline/identify.ts";
import type { Database } from "../platform/db.ts";
import { type AccountRow, accounts, type Environment } from "../platform/tables.ts";

/** The route middlewares that say which credential a route needs, from what src/pipeline/identify.ts found. */

const noCredential = (what: string) => unauthorized(`Send ${what} as Authorization: Bearer <token>.`, false);

/** The credential a route takes, as its declaration says it (src/operation/operation.ts). */
interface RequiredCredential {
  credential: "api-key" | "account" | "admin" | "github";
  scope?: string;
}

/**
 * Why this credential may not call a route that takes `required`, from the credential alone: 401 (who are you: none,
 * a bad one, a login on a data route) or 403 (may you: an API key on a login route, a token without the route's
 * scope). Admission asks it before any bucket (src/pipeline/admission.ts), so it answers before any limit's 429 and
 * the request is counted as refused; the route's guard throws it. A key's own checks (revoked, address, scope,
 * environment) are its object's, which makes them before its limits too.
 */
export function credentialMisfit(required: RequiredCredential, credential: Credential): ApiError | undefined {
  if (required.credential === "github") return undefined; // the report's signature, checked by its route
  if (required.credential === "api-key") {
    if (credential.kind === "rejected") return credential.error;
    if (credential.kind === "login") return unauthorized("This route needs an API key, not an account login.", true);
    return credential.kind === "none" ? noCredential("your API key") : undefined;
  }
  if (credential.kind === "api-key" || (credential.kind === "rejected" && credential.wasApiKey)) {
    return new ApiError(403, apiKeyOnLoginRoute(required, credential.kind === "api-key" ? credential.environment : undefined));
  }
  if (credential.kind === "rejected") return credential.error;
  if (credential.kind === "none") return noCredential("your account login (a JWT from the identity provider)");
  const scope = required.credential === "admin" ? required.scope : undefined;
  if (scope !== undefined && !credential.identity.scopes.has(scope))
    return new ApiError(403, `This route needs the "${scope}" scope, which your token does not hold.`);
  return undefined;
}

/**
 * An API key on a route that takes a login or an admin token: which key it is (its environment, when it was read)
 * and what the route takes instead. A test key on the admin ingestion is pointed at its sandbox's own.
 */
function apiKeyOnLoginRoute(required: RequiredCredential, environment: Environment | undefined): string {
  const which = environment === undefined ? "" : `This is a ${environment} API key. `;
  if (required.credential !== "admin")
    return `${which}API keys cannot manage keys or accounts: this route takes your account login (a JWT from the identity provider).`;
  const scope = required.scope === undefined ? "" : ` whose scope holds "${required.scope}"`;
  const sandbox =
    environment === "test" && required.scope === "prices:write"
      ? " A test key changes its account's sandbox with POST /test/observations (scope sandbox:write)."
      : "";
  return `${which}API keys cannot manage keys or accounts, nor call admin routes: this route takes an admin token (a JWT from the identity provider${scope}).${sandbox}`;
}

/** The request's credential, once it fits the route (else its refusal is thrown). */
function fitting(c: Context<AppEnv>, required: RequiredCredential): Credential {
  const misfit = credentialMisfit(required, c.var.credential);
  if (misfit) throw misfit;
  return c.var.credential;
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
  const credential = fitting(c, { credential: "account" });
  if (credential.kind === "login") c.set("account", await ensureAccount(c.var.services.db, credential.identity.sub));
  await next();
};

/** Admin: a valid IdP JWT whose `scope` claim holds `scope`. */
export const requireScope =
  (scope: string): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    fitting(c, { credential: "admin", scope });
    await next();
  };

/** Data routes: an active API key (its object has already admitted it). */
export const requireApiKey: MiddlewareHandler<AppEnv> = async (c, next) => {
  const credential = fitting(c, { credential: "api-key" });
  if (credential.kind !== "api-key" || !credential.key) throw noCredential("your API key");
  c.set("apiKey", credential.key);
  await next();
};
