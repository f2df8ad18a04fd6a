import type { MiddlewareHandler } from "hono";
import { keyObjectControl } from "../api-keys/object/stub.ts";
import type { SnapshotAccess } from "../catalogue/service.ts";
import { snapshotAccess } from "../catalogue/snapshot/stub.ts";
import { oauthHelpers } from "../connect/server.ts";
import type { WebhookMessage } from "../events/messages.ts";
import type { AppEnv, RequestServices } from "../http/app-env.ts";
import { readConfig } from "../platform/config.ts";
import type { Database } from "../platform/db.ts";
import { WorkMeter } from "../platform/metered.ts";
import { sandboxFactsOf } from "../sandbox/facts.ts";
import { accountSandbox } from "../sandbox/stub.ts";
import { publishCommitted } from "./after-commit.ts";
import { refuseMisconfigured } from "./client-ip.ts";

/**
 * Builds the request's context, once, before anything else runs: the validated configuration
 * (cached per isolate), a D1 client, R2 buckets and a queue that count what they do into the request's work
 * meter, and the control of the keys' objects. A misconfigured worker answers 500 naming the variable, counted like
 * any anonymous call. The request's one log line (LOG_INVOCATION_WORK) goes once its tally is final: when its body
 * has streamed and its work after the answer has ended.
 */
export const requestServices: MiddlewareHandler<AppEnv> = async (c, next) => {
  const work = new WorkMeter();
  const config = readConfig(c.env);
  if (typeof config === "string") c.res = await refuseMisconfigured(c, work, config);
  else {
    // Each metered binding is built on first use: most data requests touch one of them, or none.
    let db: Database | undefined;
    let alerts: Database | undefined;
    let replica: Database | undefined;
    let queue: Queue<WebhookMessage> | undefined;
    let catalogue: SnapshotAccess | undefined;
    let archive: R2Bucket | undefined;
    let oauthKv: KVNamespace | undefined;
    const services: RequestServices = {
      config,
      get db() {
        return (db ??= work.database(c.env.DB));
      },
      get alerts() {
        return (alerts ??= work.alertsDatabase(c.env.ALERTS_DB));
      },
      get replica() {
        // A session has prepare and batch, all drizzle's D1 driver calls.
        return (replica ??= work.database(c.env.DB.withSession("first-unconstrained") as unknown as D1Database));
      },
      keyObjects: keyObjectControl(c.env, work),
      get queue() {
        return (queue ??= work.queue(c.env.WEBHOOK_QUEUE));
      },
      get catalogue() {
        // Only the two bindings it reads: a spread of the whole env was ~1 % of a small response's CPU in a profile.
        const { CATALOGUE, CATALOGUE_BUILDER } = c.env;
        catalogue ??= snapshotAccess({ CATALOGUE: work.bucket(CATALOGUE), CATALOGUE_BUILDER }, work);
        return catalogue;
      },
      get archive() {
        return (archive ??= work.bucket(c.env.ARCHIVE));
      },
      get oauthKv() {
        return (oauthKv ??= work.kv(c.env.OAUTH_KV));
      },
      get oauth() {
        return oauthHelpers(new URL(c.req.url).origin, services.oauthKv);
      },
      sandboxOf: (accountId) => accountSandbox(c.env.SANDBOX, work, accountId),
      sandboxFacts: sandboxFactsOf((accountId) => services.sandboxOf(accountId)),
      work,
      afterAnswer(after) {
        c.executionCtx.waitUntil(work.follow(after));
      },
      afterCommit: (events, options) => publishCommitted(c.env, services, events, options),
    };
    c.set("services", services);
    await next();
  }
  // The id the request's log line carries: a response a route made itself (MCP's transport) has not been given it.
  if (!c.res.headers.has("X-Request-Id")) c.res.headers.set("X-Request-Id", c.get("requestId"));
  work.whenFinal(() => work.log(c.env, `${c.req.method} ${c.req.path}`, c.get("requestId")));
};
