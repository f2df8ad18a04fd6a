/**
 * Cloudflare's Workers Rate Limiting binding (emulated locally by miniflare), one binding per plan
 * because a binding's limit is fixed in its configuration, after the same D1 lookup as the other peer.
 */

import { ApiError } from "../../../src/http/errors.ts";
import { PLAN_LIMITS } from "../../../src/rate-limit/plans.ts";
import { lookUpKeyInD1, type PeerEnv, peerApp } from "../shared.ts";

export { CatalogueBuilder } from "../shared.ts";

type NativeEnv = PeerEnv<{ FREE_LIMITER: RateLimit; STANDARD_LIMITER: RateLimit; PREMIUM_LIMITER: RateLimit }>;

/** The plan's binding, told apart by its per-minute limit (each plan's is different). */
const binding = (env: NativeEnv["Bindings"], perMinute: number): RateLimit =>
  ({
    [PLAN_LIMITS.free.per_minute]: env.FREE_LIMITER,
    [PLAN_LIMITS.standard.per_minute]: env.STANDARD_LIMITER,
    [PLAN_LIMITS.premium.per_minute]: env.PREMIUM_LIMITER,
  })[perMinute]!;

const app = peerApp<NativeEnv>(lookUpKeyInD1(), async (c, next) => {
  const keyHash = c.var.credential.kind === "api-key" ? c.var.credential.keyHash : "";
  const { success } = await binding(c.env, c.var.limits.per_minute).limit({ key: keyHash });
  if (!success) throw new ApiError(429, `Rate limit exceeded: ${c.var.limits.per_minute} requests per minute.`, { "Retry-After": "60" });
  await next();
});

export default { fetch: app.fetch } satisfies ExportedHandler<Env>;
