/**
 * Cloudflare's Workers Rate Limiting binding (emulated locally by miniflare), one binding per plan
 * because a binding's limit is fixed in its configuration, after the same D1 lookup as the other peer.
 */
import type { Env } from "../../../src/env.ts";
import type { PlanName } from "../../../src/db/schema.ts";
import { ApiError } from "../../../src/errors.ts";
import { PLAN_LIMITS } from "../../../src/plans.ts";
import { lookUpKeyInD1, peerApp, type PeerEnv } from "../shared.ts";

type NativeEnv = PeerEnv<{ FREE_LIMITER: RateLimit; STANDARD_LIMITER: RateLimit; PREMIUM_LIMITER: RateLimit }>;

const binding = (env: NativeEnv["Bindings"], plan: PlanName): RateLimit =>
  ({ free: env.FREE_LIMITER, standard: env.STANDARD_LIMITER, premium: env.PREMIUM_LIMITER })[plan];

const app = peerApp<NativeEnv>(lookUpKeyInD1(), async (c, next) => {
  const keyHash = c.var.credential.kind === "api-key" ? c.var.credential.keyHash : "";
  const { success } = await binding(c.env, c.var.plan).limit({ key: keyHash });
  if (!success) throw new ApiError(429, `Rate limit exceeded: ${PLAN_LIMITS[c.var.plan].per_minute} requests per minute.`, { "Retry-After": "60" });
  await next();
});

export default { fetch: app.fetch } satisfies ExportedHandler<Env>;
