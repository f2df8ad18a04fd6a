/**
 * What the peer workers share. They are measuring sticks for `npm run bench`, not product code:
 * each mounts the product's own data routes (src/catalogue/routes.ts) behind the product's own
 * request context (src/pipeline/services.ts) and door (src/pipeline/key-data.ts), so the handler is byte for byte the one the real worker
 * runs; only what comes between them (authentication, rate limiting) differs.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { loadKeyState } from "../../src/api-keys/object/key-record.ts";
import { competitorRoutes, productRoutes } from "../../src/catalogue/routes.ts";
import type { AppEnv } from "../../src/http/app-env.ts";
import { ApiError, notFound, onError } from "../../src/http/errors.ts";
import { keyDataDoor } from "../../src/pipeline/key-data.ts";
import { requestServices } from "../../src/pipeline/services.ts";
import type { Limits } from "../../src/rate-limit/types.ts";

/** Each peer exports it: the product's catalogue routes poke the snapshot's builder. */
export { CatalogueBuilder } from "../../src/catalogue/snapshot/builder.ts";

export interface PeerEnv<Bindings> {
  Bindings: Bindings & AppEnv["Bindings"];
  Variables: AppEnv["Variables"] & { limits: Limits };
}

/** A Hono app whose middleware runs before the product's data routes and error handling. */
export function peerApp<E extends PeerEnv<object>>(...middleware: MiddlewareHandler<E>[]) {
  const app = new Hono<E>();
  app.use(requestServices as unknown as MiddlewareHandler<E>); // E extends AppEnv, which Hono cannot see through
  for (const handler of middleware) app.use(handler);
  app.use(keyDataDoor as unknown as MiddlewareHandler<E>); // the product's door: what the admitted key reads (live)
  app.route("/products", productRoutes);
  app.route("/competitors", competitorRoutes);
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
    const found = await loadKeyState(c.var.services.db, keyHash);
    if (found?.status !== "active") throw unauthorized("This API key is not valid.");
    c.set("credential", { kind: "api-key", keyHash, key: { id: found.keyId, accountId: found.accountId } });
    c.set("limits", found.limits);
    await next();
  };
