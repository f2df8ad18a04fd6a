/**
 * What a team would build from popular packages: a D1 lookup of the key's hash on every request,
 * then `hono-rate-limiter` with `@hono-rate-limiter/cloudflare`'s Durable Object store (one object
 * per key, fixed 60 s window, the plan's per-minute limit), as the packages' READMEs show it.
 */
import { type DurableObjectRateLimiter, DurableObjectStore } from "@hono-rate-limiter/cloudflare";
import { rateLimiter } from "hono-rate-limiter";
import { lookUpKeyInD1, type PeerEnv, peerApp } from "../shared.ts";

export { DurableObjectRateLimiter } from "@hono-rate-limiter/cloudflare";
export { CatalogueBuilder } from "../shared.ts";

type HrlEnv = PeerEnv<{ HRL_CACHE: DurableObjectNamespace<DurableObjectRateLimiter> }>;

const app = peerApp<HrlEnv>(lookUpKeyInD1(), (c, next) =>
  rateLimiter<HrlEnv>({
    windowMs: 60_000,
    limit: (c) => c.var.limits.per_minute,
    standardHeaders: "draft-6",
    keyGenerator: (c) => (c.var.credential.kind === "api-key" ? c.var.credential.keyHash : ""),
    store: new DurableObjectStore({ namespace: c.env.HRL_CACHE }),
  })(c, next),
);

export default { fetch: app.fetch } satisfies ExportedHandler<Env>;
