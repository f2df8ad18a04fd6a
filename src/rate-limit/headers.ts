import type { Decision, Limits } from "./types.ts";

/**
 * The contract's headers for a decision: X-RateLimit-*, the IETF RateLimit fields and, on a refusal, Retry-After.
 * Set straight onto the response (every response carries them, so no intermediate object per request); the
 * policy line depends only on the limits, so it is built again only when they differ from the last response's.
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

/** The last policy line built, by the limits' values: a key's limits arrive as a new object with each decision. */
let lastPolicy: { perMinute: number; perHour: number; perDay: number; line: string } | undefined;

function policyOf({ per_minute: perMinute, per_hour: perHour, per_day: perDay }: Limits): string {
  if (lastPolicy?.perMinute !== perMinute || lastPolicy.perHour !== perHour || lastPolicy.perDay !== perDay) {
    const line = `"minute";q=${perMinute};w=60, "hour";q=${perHour};w=3600, "day";q=${perDay};w=86400`;
    lastPolicy = { perMinute, perHour, perDay, line };
  }
  return lastPolicy.line;
}

export function rateLimitDetail(decision: Decision): string {
  const period = decision.exceeded ?? "minute";
  const quota = { minute: decision.limits.per_minute, hour: decision.limits.per_hour, day: decision.limits.per_day }[period];
  return `Rate limit exceeded: ${quota} requests per ${period}.`;
}
