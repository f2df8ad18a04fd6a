/**
 * The shapes of rate limiting the rest of the worker shares. A leaf: it imports nothing, so the bucket objects,
 * their stubs and the admission can all depend on it without depending on each other.
 */

/** A bucket's quotas. The plans' numbers are in src/rate-limit/plans.ts. */
export interface Limits {
  per_minute: number;
  per_hour: number;
  per_day: number;
}

/** The spans a key's usage is counted in, and the quotas that can refuse a request. */
export const GRANULARITIES = ["minute", "hour", "day"] as const;
export type Granularity = (typeof GRANULARITIES)[number];

/**
 * A budget a route's costly requests count in beside the key's own limits, per key, in clock-aligned windows (the
 * whole list with `currency` or without gzip: 60 an hour). Declared with the route (src/operation/operation.ts).
 */
export interface Budget {
  /** Its name in RateLimit-Policy, RateLimit and the refusal's detail. */
  name: string;
  quota: number;
  windowSeconds: number;
}

/** What is left of a budget the request counted in (or was refused by). */
export interface BudgetUse extends Budget {
  remaining: number;
  /** Whole seconds until the budget refills (its window's end), and that instant (epoch ms). */
  resetSeconds: number;
  refillsAt: number;
}

/** A bucket's answer (a fixed bucket's or a key's): everything the headers need. */
export interface Decision {
  allowed: boolean;
  limits: Limits;
  remaining: number;
  /** Whole seconds until `remaining` next goes up (on a refusal: until a request can go). */
  resetSeconds: number;
  /** The same, exact, for the isolate's memory of refusals. */
  resetMs: number;
  /** On a refusal, the quota that refused: one of the key's limits, or the route's budget. */
  exceeded?: Granularity | "budget";
  /** The route's budget, when the request counted in it or was refused by it. */
  budget?: BudgetUse;
}
