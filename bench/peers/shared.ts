/**
 * What the peer workers share. They are measuring sticks for `npm run bench`, not product code:
 * each mounts the product's own data routes (src/routes/catalogue.ts, which read the in-memory
 * catalogue of src/services/catalogue.ts), so the handler is byte for byte the one the real worker
 * runs; only what comes before it differs.
 */
import { Hono, type MiddlewareHandler } from "hono";
import type { AppEnv } from "../../src/app-env.ts";
import { hashApiKey } from "../../src/auth/api-key.ts";
import { database } from "../../src/db/client.ts";
import type { PlanName } from "../../src/db/schema.ts";
import { ApiError, notFound, onError } from "../../src/errors.ts";
import { catalogueRoutes } from "../../src/routes/catalogue.ts";
import { findKeyForAdmission } from "../../src/services/api-keys.ts";

export interface PeerEnv<Bindings> {
  Bindings: Bindings & AppEnv["Bindings"];
  Variables: AppEnv["Variables"] & { plan: PlanName };
}

/** A Hono app whose middleware runs before the product's data routes and error handling. */
export function peerApp<E extends PeerEnv<object>>(...middleware: MiddlewareHandler<E>[]) {
  const app = new Hono<E>();
  app.use(async (c, next) => {
    c.set("work", { d1: 0, keyObjectCalls: 0, otherObjectCalls: 0 });
    await next();
  });
  for (const handler of middleware) app.use(handler);
  app.route("/", catalogueRoutes);
  app.notFound(notFound);
  app.onError(onError);
  return app;
}

const unauthorized = (detail: string) => new ApiError(401, detail, { "WWW-Authenticate": 'Bearer realm="price-data-api"' });

/**
 * What a team would write first: hash the bearer key and look it up in D1 on every request
 * (the product's own query: the key joined to its account's plan).
 */
export const lookUpKeyInD1 =
  <E extends PeerEnv<object>>(): MiddlewareHandler<E> =>
  async (c, next) => {
    const match = /^Bearer[ \t]+(\S+)$/i.exec(c.req.header("Authorization") ?? "");
    if (!match) throw unauthorized("Send your API key as Authorization: Bearer <key>.");
    const keyHash = await hashApiKey(match[1]!);
    const found = await findKeyForAdmission(database(c.env.DB, c.var.work), keyHash);
    if (!found || found.status !== "active") throw unauthorized("This API key is not valid.");
    c.set("credential", { kind: "api-key", keyHash, key: { id: found.id, accountId: found.accountId } });
    c.set("plan", found.plan);
    await next();
  };
