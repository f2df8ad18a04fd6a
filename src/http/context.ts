import type { MiddlewareHandler } from "hono";
import { catalogueStore } from "../catalogue/client.ts";
import { readConfig } from "../platform/config.ts";
import { database, type Database } from "../platform/db.ts";
import { refuseMisconfigured } from "../rate-limit/admission.ts";
import { rateLimitControl } from "../rate-limit/client.ts";
import { noWork } from "../rate-limit/types.ts";
import type { AppEnv } from "./app-env.ts";

/**
 * Builds the request's context, once, before anything else runs: the validated configuration
 * (cached per isolate), a D1 client that counts its round trips, the rate limiter's control and
 * the queue. A misconfigured worker answers 500 naming the variable, counted like any anonymous call.
 */
export const requestContext: MiddlewareHandler<AppEnv> = async (c, next) => {
  const work = noWork();
  const config = readConfig(c.env);
  if (typeof config === "string") return refuseMisconfigured(c, work, config);
  let db: Database | undefined;
  c.set("ctx", {
    config,
    // Built on first use: a data request served from the catalogue snapshot never touches D1.
    get db() {
      return (db ??= database(c.env.DB, work));
    },
    limiter: rateLimitControl(c.env),
    queue: c.env.WEBHOOK_QUEUE,
    catalogue: catalogueStore(c.env, work),
    work,
  });
  await next();
};
