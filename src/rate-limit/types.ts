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

/** A bucket's answer (a fixed bucket's or a key's): everything the headers need. */
export interface Decision {
  allowed: boolean;
  limits: Limits;
  remaining: number;
  /** Whole seconds until `remaining` next goes up (on a refusal: until a request can go). */
  resetSeconds: number;
  /** The same, exact, for the isolate's memory of refusals. */
  resetMs: number;
  /** On a refusal, the quota that refused. */
  exceeded?: Granularity;
}
