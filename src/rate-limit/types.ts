/**
 * The shapes the rate limiter shares with the rest of the worker. A leaf: it imports nothing, so the
 * Durable Object, its client, the admission middleware and the services that push revocations and
 * plan changes can all depend on it without depending on each other.
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

/** What the limiter tells the worker; everything the headers need. */
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

/** Who a key is and whose: what the object's record of a key and its answer about it both name. */
interface KeyOwner {
  keyId: string;
  accountId: string;
}

/**
 * Where a key may be used from (canonical CIDRs; null: anywhere) and what it may read (null: everything).
 */
export interface KeyRestrictions {
  allowedIps: string[] | null;
  scopes: string[] | null;
}

/**
 * What a key's object keeps of its key, in its storage, so a seen key never asks D1 again. `expiresAt` (epoch ms,
 * or null) is the instant from which the object refuses the key. A record, not an answer: it holds what decides
 * a request (limits, restrictions), where KeyAdmission holds what was decided.
 */
export type KeyState =
  | (KeyOwner & KeyRestrictions & { status: "active"; limits: Limits; expiresAt: number | null })
  | (KeyOwner & { status: "revoked" });

/** What the object needs of a request to decide it beyond counting: the client's address and the scope its route needs. */
export interface KeyRequest {
  ip: string;
  scope: string | undefined;
}

/**
 * The key object's answer to one admission, which the worker's stub hands on as it came (src/rate-limit/stub.ts).
 * `forbidden`: outside the key's allowed addresses or scopes, a 403 with `detail`, not counted against the key.
 * `d1Queries`: the D1 reads the answer cost (one on the object's first wake, else none).
 */
export type KeyAdmission = { d1Queries: number } & (
  | (KeyOwner & { status: "active"; decision: Decision; scopes: string[] | null })
  | { status: "forbidden"; detail: string }
  | { status: "expired"; expiresAt: number }
  | { status: "revoked" | "unknown" }
);

/** How long a key hash that matched no key is answered "unknown" (by its object and by each isolate) without asking D1 again. */
export const UNKNOWN_KEY_MS = 60_000;

/** The usage buckets of one granularity whose start (epoch ms, aligned to the granularity) is `from` ≤ start < `to`. */
export interface UsageSpan {
  granularity: Granularity;
  from: number;
  to: number;
}

/** One bucket of a key's usage: `start` is epoch ms. */
export interface UsageCount {
  start: number;
  admitted: number;
  refused: number;
}

/**
 * What a request cost, reported by X-Work-Counts when EXPOSE_WORK_COUNTS is on: D1 round trips and statements
 * (a batch's one by one) with the rows D1 says they read and wrote, object calls, R2 operations by billing class
 * and queue messages sent.
 */
export interface Work {
  d1: number;
  d1Statements: number;
  d1RowsRead: number;
  d1RowsWritten: number;
  /** Calls to an API key's own object. */
  keyObjectCalls: number;
  /** Calls to the objects of the other buckets (account, admin subject, client IP) and to the catalogue builder. */
  otherObjectCalls: number;
  r2ClassA: number;
  r2ClassB: number;
  queueSent: number;
}

export const noWork = (): Work => ({
  d1: 0,
  d1Statements: 0,
  d1RowsRead: 0,
  d1RowsWritten: 0,
  keyObjectCalls: 0,
  otherObjectCalls: 0,
  r2ClassA: 0,
  r2ClassB: 0,
  queueSent: 0,
});

/**
 * Revocations, expiries, plan changes and restrictions reach each key's object before the caller answers: the very next
 * request sees them. Each call to a key's object is counted in the request's `work`.
 */
export interface RateLimitControl {
  revoke(key: { keyHash: string; id: string; accountId: string }): Promise<void>;
  /** The key is refused from `expiresAt` (epoch ms) on; an earlier expiry the object already has stays. */
  expire(keyHash: string, expiresAt: number): Promise<void>;
  /** The new plan's limits, to each key's object, MAX_OPEN_CONNECTIONS at a time; returns the hashes whose object could not be reached. */
  setLimits(keyHashes: readonly string[], limits: Limits): Promise<string[]>;
  /** After D1 has the key's new allowed addresses, scopes or plan: its object reads the key, and the next request is decided by it. */
  refresh(keyHash: string): Promise<void>;
  /** A key's usage in `span`, from its own object. */
  usage(keyHash: string, span: UsageSpan): Promise<UsageCount[]>;
}
