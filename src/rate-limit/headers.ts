import type { Budget, Decision, Limits } from "./types.ts";

/**
 * The contract's headers for a decision: X-RateLimit-*, the IETF RateLimit fields and, on a refusal, Retry-After.
 * Set straight onto the response (every response carries them, so no intermediate object per request); the
 * policy line depends only on the limits, so it is built again only when they differ from the last response's.
 * A request that counted in a route's budget (the whole list) has that budget as an entry of its own in both IETF
 * fields; refused by it, the budget alone is the RateLimit item, and the X-RateLimit-* and Retry-After are its.
 */
export function setRateLimitHeaders(headers: Headers, decision: Decision): void {
  const { limits, remaining, resetSeconds, budget } = decision;
  headers.set("X-RateLimit-Limit", String(limits.per_minute));
  headers.set("X-RateLimit-Remaining", String(remaining));
  headers.set("X-RateLimit-Reset", String(resetSeconds));
  const policy = policyOf(limits);
  headers.set("RateLimit-Policy", budget ? `${policy}, "${budget.name}";q=${budget.quota};w=${budget.windowSeconds}` : policy);
  const limitItem = `"${decision.exceeded ?? "minute"}";r=${remaining};t=${resetSeconds}`;
  const budgetItem = budget && `"${budget.name}";r=${budget.remaining};t=${budget.resetSeconds}`;
  headers.set("RateLimit", decision.exceeded === "budget" ? budgetItem! : budgetItem ? `${limitItem}, ${budgetItem}` : limitItem);
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

const PERIODS: Record<number, string> = { 60: "minute", 3600: "hour", 86400: "day" };
/** A budget's window in words: "hour" for 3600 s. */
export const budgetPeriod = ({ windowSeconds }: Budget) => PERIODS[windowSeconds] ?? `${windowSeconds} seconds`;

/**
 * A 429's detail: the quota that refused and, for a route's budget, what it covers (`covers`, from the route's
 * declaration) and when it refills.
 */
export function rateLimitDetail(decision: Decision, covers?: string): string {
  if (decision.exceeded === "budget") {
    const budget = decision.budget!;
    const refill = new Date(budget.refillsAt).toISOString().replace(".000Z", "Z");
    return (
      `Rate limit exceeded: this key's "${budget.name}" budget, ${budget.quota} requests per ${budgetPeriod(budget)}${covers ? ` (${covers})` : ""}, ` +
      `is spent; it refills at ${refill}, in ${budget.resetSeconds} seconds.`
    );
  }
  const period = decision.exceeded ?? "minute";
  const quota = { minute: decision.limits.per_minute, hour: decision.limits.per_hour, day: decision.limits.per_day }[period];
  return `Rate limit exceeded: ${quota} requests per ${period}.`;
}
