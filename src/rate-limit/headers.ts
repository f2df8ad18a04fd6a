import type { Decision } from "./types.ts";

/** The contract's headers for a decision: X-RateLimit-*, the IETF RateLimit fields and, on a refusal, Retry-After. */
export function rateLimitHeaders(decision: Decision): Record<string, string> {
  const { limits, remaining, resetSeconds } = decision;
  const headers: Record<string, string> = {
    "X-RateLimit-Limit": String(limits.per_minute),
    "X-RateLimit-Remaining": String(remaining),
    "X-RateLimit-Reset": String(resetSeconds),
    "RateLimit-Policy": `"minute";q=${limits.per_minute};w=60, "hour";q=${limits.per_hour};w=3600, "day";q=${limits.per_day};w=86400`,
    RateLimit: `"${decision.exceeded ?? "minute"}";r=${remaining};t=${resetSeconds}`,
  };
  if (!decision.allowed) headers["Retry-After"] = String(resetSeconds);
  return headers;
}

export function rateLimitDetail(decision: Decision): string {
  const period = decision.exceeded ?? "minute";
  const quota = { minute: decision.limits.per_minute, hour: decision.limits.per_hour, day: decision.limits.per_day }[period];
  return `Rate limit exceeded: ${quota} requests per ${period}.`;
}
