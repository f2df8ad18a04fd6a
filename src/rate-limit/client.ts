import type { Decision, KeyAdmission, Limits, RateLimitControl, ShortCircuited, Work } from "./types.ts";
import { bucketStart } from "./usage-range.ts";

const MAX_REMEMBERED_REFUSALS = 10_000;

/**
 * Refusals remembered by this isolate until their Retry-After, so a client hammering after a 429
 * does not keep its object busy. Only refusals are remembered: this never admits anything the
 * object would refuse, and a key's refusal is forgotten at its expiry, so the object answers the 401.
 * A revoke, rotation or plan change made through this isolate forgets the bucket's entry.
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

function remember(name: string, decision: Decision, expiresAt: number | null = null) {
  if (decision.allowed) return;
  if (refusals.size >= MAX_REMEMBERED_REFUSALS) refusals.delete(refusals.keys().next().value!);
  const until = Date.now() + decision.resetMs;
  refusals.set(name, { until: expiresAt === null ? until : Math.min(until, expiresAt), decision });
}

/**
 * The refusals this isolate answered for each key from memory, per minute: the key's object never saw
 * them, so they ride along on the isolate's next call to it (an admission or a usage read) and are counted there.
 */
const shortCircuited = new Map<string, Map<number, number>>();

function countShortCircuited(keyHash: string) {
  if (!shortCircuited.has(keyHash) && shortCircuited.size >= MAX_REMEMBERED_REFUSALS) shortCircuited.delete(shortCircuited.keys().next().value!);
  const perMinute = shortCircuited.get(keyHash) ?? new Map<number, number>();
  const minute = bucketStart(Date.now(), "minute");
  perMinute.set(minute, (perMinute.get(minute) ?? 0) + 1);
  shortCircuited.set(keyHash, perMinute);
}

function takeShortCircuited(keyHash: string): ShortCircuited {
  const perMinute = shortCircuited.get(keyHash);
  shortCircuited.delete(keyHash);
  return perMinute ? [...perMinute] : [];
}

function forgetRefusals(names: readonly string[]) {
  for (const name of names) refusals.delete(name);
}

const limiter = (env: Env, name: string) => env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(name));

export type KeyOutcome =
  | { status: "active"; decision: Decision; key?: { id: string; accountId: string } }
  | { status: "expired"; expiresAt: number }
  | { status: "revoked" | "unknown" };

/** Admission for an API key, named by its hash. */
export async function admitKey(env: Env, keyHash: string, work: Work): Promise<KeyOutcome> {
  const refused = rememberedRefusal(keyHash);
  if (refused) {
    countShortCircuited(keyHash);
    return { status: "active", decision: refused };
  }
  work.keyObjectCalls++;
  const result: KeyAdmission = await limiter(env, keyHash).admitKey(keyHash, takeShortCircuited(keyHash));
  work.d1 += result.d1Queries;
  if (result.status === "expired") return { status: "expired", expiresAt: result.expiresAt };
  if (result.status !== "active") return { status: result.status };
  remember(keyHash, result.decision, result.expiresAt);
  return { status: "active", decision: result.decision, key: { id: result.keyId, accountId: result.accountId } };
}

/** Admission for a bucket whose limits are fixed (account, admin subject, client IP). */
export async function admitBucket(env: Env, name: string, limits: Limits, work: Work): Promise<Decision> {
  const refused = rememberedRefusal(name);
  if (refused) return refused;
  work.otherObjectCalls++;
  const decision = await limiter(env, name).admit(limits);
  remember(name, decision);
  return decision;
}

export const rateLimitControl = (env: Env): RateLimitControl => ({
  async revoke(key) {
    forgetRefusals([key.keyHash]);
    await limiter(env, key.keyHash).revoke(key.id, key.accountId);
  },
  async expire(keyHash, expiresAt) {
    forgetRefusals([keyHash]);
    await limiter(env, keyHash).expire(keyHash, expiresAt);
  },
  usage(keyHash, granularity, from, to) {
    return limiter(env, keyHash).usageBuckets(granularity, from, to, takeShortCircuited(keyHash));
  },
  async setLimits(keyHashes, limits) {
    forgetRefusals(keyHashes);
    await Promise.all(keyHashes.map((hash) => limiter(env, hash).setLimits(limits)));
  },
});
