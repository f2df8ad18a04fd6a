import type { Environment } from "../../platform/tables.ts";
import type { Budget, Decision, Granularity, Limits } from "../../rate-limit/types.ts";

/**
 * The shapes the key's object shares with the rest of the worker: the object, its stub, the admission
 * and the services that push revocations and plan changes depend on these, not on each other.
 */

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

/**
 * What the object needs of a request to decide it beyond counting: the client's address, the scope its route needs,
 * the environment its route takes, and a budget of the key's own the request counts in beside the key's limits.
 */
export interface KeyRequest {
  ip: string;
  scope: string | undefined;
  /**
   * The environment the route takes (absent: either) and the key's own, read from the key's head (which the hash that
   * names the object covers, so the object can trust it).
   */
  environment?: { needed: Environment; key: Environment };
  budget?: Budget;
}

/** Why a key's restrictions refuse a request: its address, its route's scope, or its route's environment. */
export type KeyRefusal =
  | { kind: "ip"; ip: string }
  | { kind: "scope"; needed: string }
  | { kind: "environment"; needed: Environment; key: Environment };

/**
 * The key object's answer to one admission, which the worker's stub hands on as it came (src/api-keys/object/stub.ts).
 * `forbidden`: outside the key's allowed addresses or scopes, not counted against the key; the object says why, and
 * src/api-keys/refusal.ts says it to the caller.
 * `unchecked`: asked not to look the key up, the object has never read it (a new key's first request, or a made-up one).
 */
export type KeyAdmission =
  | (KeyOwner & { status: "active"; decision: Decision; scopes: string[] | null })
  | { status: "forbidden"; reason: KeyRefusal }
  | { status: "expired"; expiresAt: number }
  | { status: "revoked" | "unknown" }
  | { status: "unchecked" };

/** An answer of an object allowed to look the key up: never "unchecked". */
export type CheckedAdmission = Exclude<KeyAdmission, { status: "unchecked" }>;

/** How long a key hash that matched no key is answered "unknown" (by its object and by each isolate) without asking D1 again. */
export const UNKNOWN_KEY_MS = 60_000;

/** The usage buckets of one granularity whose start (epoch ms, aligned to the granularity) is `from` ≤ start < `to`. */
export interface UsageSpan {
  granularity: Granularity;
  from: number;
  to: number;
}

/**
 * One bucket of a key's usage: `start` is epoch ms. `uncertain`: of `admitted`, those a restart of the key's object
 * counted as made without knowing (src/api-keys/object/reservations.ts).
 */
export interface UsageCount {
  start: number;
  admitted: number;
  refused: number;
  uncertain: number;
}

/**
 * Revocations, expiries, plan changes and restrictions reach each key's object before the caller answers: the very next
 * request sees them. Each call to a key's object is counted in the request's `work`.
 */
export interface KeyObjectControl {
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

/** The key a request was admitted with. */
export interface ApiKeyOfRequest {
  id: string;
  accountId: string;
  /** What the key reads: live data, or its account's sandbox (src/sandbox/). Its head says it, and the hash covers the head. */
  environment: Environment;
  /** Names the key's object, for a connection that asks it again while it lasts (an event stream). */
  keyHash: string;
  /** What the key was admitted for (the client's address, the route's scope): what such a connection asks again. */
  request: KeyRequest;
  /** What the key may read (null: everything); for routes that check per call, like /mcp's tools. */
  scopes?: string[] | null;
}
