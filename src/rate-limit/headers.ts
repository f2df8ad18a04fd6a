import type { Decision, Limits } from "./types.ts";

/**
 * The contract's headers for a decision: X-RateLimit-*, the IETF RateLimit fields and, on a refusal, Retry-After.
 * Set straight onto the response (every response carries them, so no intermediate object per request); the
 * policy line depends only on the limits, so it is built once per limits object.
 */
export function setRateLimitHeaders(headers: Headers, decision: Decision): void {
  const { limits, remaining, resetSeconds } = decision;
  headers.set("X-RateLimit-Limit", String(limits.per_minute));
  headers.set("X-RateLimit-Remaining", String(remaining));
  headers.set("X-RateLimit-Reset", String(resetSeconds));
  headers.set("RateLimit-Policy", policyOf(limits));
  headers.set("RateLimit", `"${decision.exceeded ?? "minute"}";r=${remaining};t=${resetSeconds}`);
  if (!decision.allowed) headers.set("Retry-After", String(resetSeconds));
}

const policies = new WeakMap<Limits, string>();

function policyOf(limits: Limits): string {
  let policy = policies.get(limits);
  if (policy === undefined) {
    policy = `"minute";q=${limits.per_minute};w=60, "hour";q=${limits.per_hour};w=3600, "day";q=${limits.per_day};w=86400`;
    policies.set(limits, policy);
  }
  return policy;
}

export function rateLimitDetail(decision: Decision): string {
  const period = decision.exceeded ?? "minute";
  const quota = { minute: decision.limits.per_minute, hour: decision.limits.per_hour, day: decision.limits.per_day }[period];
  return `Rate limit exceeded: ${quota} requests per ${period}.`;
}
