import type { MiddlewareHandler } from "hono";
import { keyObjectControl } from "../api-keys/object/stub.ts";
import type { CatalogueStore } from "../catalogue/service.ts";
import type { WebhookMessage } from "../events/messages.ts";
import type { AppEnv } from "../http/app-env.ts";
import { readConfig } from "../platform/config.ts";
import { type Database, database } from "../platform/db.ts";
import { countR2Into, logInvocationWork, meteredBucket, meteredQueue, noRequestWork, type RequestWork } from "../platform/metered.ts";
import { refuseMisconfigured } from "./admission.ts";

/** The catalogue's store comes from its folder, handed in by the app (src/app.ts), so this layer imports no resource. */
type CatalogueStoreOf = (env: Pick<Env, "CATALOGUE" | "CATALOGUE_BUILDER">, work: RequestWork) => CatalogueStore;

/**
 * Builds the request's context, once, before anything else runs: the validated configuration
 * (cached per isolate), a D1 client, R2 buckets and a queue that count what they do into the request's work
 * tally, and the control of the keys' objects. A misconfigured worker answers 500 naming the variable, counted like any anonymous call.
 */
export const requestServices =
  (catalogueStore: CatalogueStoreOf): MiddlewareHandler<AppEnv> =>
  async (c, next) => {
    const work = noRequestWork();
    const config = readConfig(c.env);
    if (typeof config === "string") return refuseMisconfigured(c, work, config);
    const countR2 = countR2Into(work);
    // Each metered binding is built on first use: most data requests touch one of them, or none.
    let db: Database | undefined;
    let queue: Queue<WebhookMessage> | undefined;
    let catalogue: CatalogueStore | undefined;
    let archive: R2Bucket | undefined;
    c.set("services", {
      config,
      get db() {
        return (db ??= database(c.env.DB, work));
      },
      keyObjects: keyObjectControl(c.env, work),
      get queue() {
        return (queue ??= meteredQueue(c.env.WEBHOOK_QUEUE, work));
      },
      get catalogue() {
        // Only the two bindings it reads: a spread of the whole env was ~1 % of a small response's CPU in a profile.
        const { CATALOGUE, CATALOGUE_BUILDER } = c.env;
        catalogue ??= catalogueStore({ CATALOGUE: meteredBucket(CATALOGUE, countR2), CATALOGUE_BUILDER }, work);
        return catalogue;
      },
      get archive() {
        return (archive ??= meteredBucket(c.env.ARCHIVE, countR2));
      },
      work,
      afterAnswer(after) {
        c.executionCtx.waitUntil(after.finally(() => logInvocationWork(c.env, `${c.req.method} ${c.req.path} after its answer`, work)));
      },
    });
    await next();
    // A stream's work goes on after its headers: with the meter on, its whole tally is logged when it ends.
    if (c.env.LOG_INVOCATION_WORK === "true" && c.res.body && c.res.headers.get("Content-Type")?.startsWith("text/event-stream")) {
      c.res = new Response(
        whenEnded(c.res.body, () => logInvocationWork(c.env, `${c.req.method} ${c.req.path} stream`, work)),
        c.res,
      );
    }
  };

/**
 * The body as it came, calling `ended` once when it is done or the client went away (a read pending when the client
 * cancels ends as done too: without the guard, one stream would log its tally twice).
 */
function whenEnded(body: ReadableStream<Uint8Array>, ended: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let over = false;
  const end = () => {
    if (over) return;
    over = true;
    ended();
  };
  return new ReadableStream({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (!done) return controller.enqueue(value);
      end();
      controller.close();
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  });
}
