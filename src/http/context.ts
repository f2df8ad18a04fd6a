import type { MiddlewareHandler } from "hono";
import { catalogueStore } from "../catalogue/client.ts";
import { readConfig } from "../platform/config.ts";
import { database } from "../platform/db.ts";
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
  c.set("ctx", { config, db: database(c.env.DB, work), limiter: rateLimitControl(c.env), queue: c.env.WEBHOOK_QUEUE, catalogue: catalogueStore(c.env, work), work });
  await next();
};
