import pLimit from "p-limit";
import { remember } from "../platform/bounded-map.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import {
  type Decision,
  type KeyAdmission,
  type KeyRequest,
  type Limits,
  type RateLimitControl,
  UNKNOWN_KEY_MS,
  type Work,
} from "./types.ts";

/**
 * Refusals of the fixed buckets (account, admin subject, client IP), remembered by this isolate until their
 * Retry-After, so a client hammering after a 429 does not keep that object busy. Only refusals, and only of
 * buckets whose limits never change: this never admits anything the object would refuse, and nothing another
 * isolate does can make a remembered answer wrong. A key's refusals are not remembered: a plan change or a
 * revocation made through another isolate must show on the key's next request (the key's object makes
 * repeated refusals cheap instead).
 */
const refusals = new Map<string, { until: number; decision: Decision }>();

function rememberedRefusal(name: string): Decision | undefined {
  const entry = refusals.get(name);
  if (!entry) return undefined;
  const left = entry.until - Date.now();
  if (left <= 0) {
    refusals.delete(name);
    return undefined;
  }
  return { ...entry.decision, resetSeconds: Math.ceil(left / 1000), resetMs: left };
}

/**
 * Key hashes this isolate has seen answered: as an active key (true), or as matching no key, until a minute
 * after its object said so (a number). A hash not seen yet is looked up only while the client IP's bucket has
 * room (src/middleware/admission.ts), so made-up keys cost a client its IP's quota, not D1 reads.
 */
const seenKeys = new Map<string, true | number>();

/** True when this isolate has seen the hash answered, as a key or as matching none (within the minute it remembers that). */
export function isSeenKey(keyHash: string): boolean {
  const seen = seenKeys.get(keyHash);
  return seen === true || (seen !== undefined && Date.now() < seen);
}

const limiter = (env: Env, name: string) => env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(name));

/**
 * Admission for an API key, named by its hash: the key object's answer as it came (its D1 reads added to `work`);
 * a hash remembered as matching no key is answered without a call.
 */
export async function admitKey(env: Env, keyHash: string, work: Work, request: KeyRequest): Promise<KeyAdmission> {
  const unknownUntil = seenKeys.get(keyHash);
  if (typeof unknownUntil === "number") {
    if (Date.now() < unknownUntil) return { status: "unknown", d1Queries: 0 };
    seenKeys.delete(keyHash);
  }
  work.keyObjectCalls++;
  const result = await limiter(env, keyHash).admitKey(keyHash, request);
  work.d1 += result.d1Queries;
  if (result.status === "unknown") remember(seenKeys, keyHash, Date.now() + UNKNOWN_KEY_MS);
  else if (result.status === "active" || result.status === "forbidden") remember(seenKeys, keyHash, true);
  else seenKeys.delete(keyHash);
  return result;
}

/**
 * Whether the key (by its hash) would still be admitted for `request`, without counting a request: one call to its
 * object, which reads D1 only if it was evicted and never saw the key since.
 */
export function keyStillAdmits(env: Env, keyHash: string, request: KeyRequest): Promise<boolean> {
  return limiter(env, keyHash).stillAdmits(keyHash, request);
}

/**
 * Admission for a bucket whose limits are fixed (account, admin subject, client IP); with `count: false`, only
 * whether it would admit a request now (a look at the client IP's bucket before a key hash not seen yet is looked up).
 */
export async function admitBucket(env: Env, name: string, limits: Limits, work: Work, { count = true } = {}): Promise<Decision> {
  const refused = rememberedRefusal(name);
  if (refused) return refused;
  work.otherObjectCalls++;
  const bucket = limiter(env, name);
  const decision = await (count ? bucket.admit(limits) : bucket.peek(limits));
  if (!decision.allowed) remember(refusals, name, { until: Date.now() + decision.resetMs, decision });
  return decision;
}

export function rateLimitControl(env: Env, work: Work): RateLimitControl {
  const keyObject = (keyHash: string) => {
    work.keyObjectCalls++;
    return limiter(env, keyHash);
  };
  return {
    async revoke(key) {
      await keyObject(key.keyHash).revoke(key.id, key.accountId);
    },
    async expire(keyHash, expiresAt) {
      await keyObject(keyHash).expire(keyHash, expiresAt);
    },
    usage(keyHash, span) {
      return keyObject(keyHash).usageBuckets(span);
    },
    async refresh(keyHash) {
      work.d1 += await keyObject(keyHash).refresh(keyHash);
    },
    async setLimits(keyHashes, limits) {
      const limit = pLimit(MAX_OPEN_CONNECTIONS);
      const pushed = await Promise.allSettled(keyHashes.map((hash) => limit(() => keyObject(hash).setLimits(limits))));
      return keyHashes.filter((_, i) => pushed[i]!.status === "rejected");
    },
  };
}
