import type { MiddlewareHandler } from "hono";
import type { CatalogueStore } from "../catalogue/service.ts";
import type { AppEnv } from "../http/app-env.ts";
import { readConfig } from "../platform/config.ts";
import { type Database, database } from "../platform/db.ts";
import { meteredBucket, meteredQueue, type R2Operation } from "../platform/metered.ts";
import { rateLimitControl } from "../rate-limit/stub.ts";
import { noWork, type Work } from "../rate-limit/types.ts";
import { refuseMisconfigured } from "./admission.ts";

/** The catalogue's store comes from its folder, handed in by the app (src/app.ts), so this layer imports no resource. */
type CatalogueStoreOf = (env: Env, work: Work) => CatalogueStore;

/**
 * Builds the request's context, once, before anything else runs: the validated configuration
 * (cached per isolate), a D1 client, R2 buckets and a queue that count what they do into the request's work
 * tally, and the rate limiter's control. A misconfigured worker answers 500 naming the variable, counted like any anonymous call.
 */
export const requestServices =
  (catalogueStore: CatalogueStoreOf): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const work = noWork();
    const countR2 = (operation: R2Operation) => {
      if (operation === "a") work.r2ClassA++;
      else if (operation === "b") work.r2ClassB++;
    };
    const config = readConfig(c.env);
    if (typeof config === "string") return refuseMisconfigured(c, work, config);
    let db: Database | undefined;
    c.set("services", {
      config,
      // Built on first use: a data request served from the catalogue snapshot never touches D1.
      get db() {
        return (db ??= database(c.env.DB, work));
      },
      limiter: rateLimitControl(c.env, work),
      queue: meteredQueue(c.env.WEBHOOK_QUEUE, work),
      catalogue: catalogueStore({ ...c.env, CATALOGUE: meteredBucket(c.env.CATALOGUE, countR2) }, work),
      archive: meteredBucket(c.env.ARCHIVE, countR2),
      work,
    });
    await next();
  };
