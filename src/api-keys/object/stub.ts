import pLimit from "p-limit";
import { remember } from "../../platform/bounded-map.ts";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import { isolateMap } from "../../platform/isolate-memory.ts";
import type { ObjectAnswer, WorkMeter } from "../../platform/metered.ts";
import { type CheckedAdmission, type KeyAdmission, type KeyObjectControl, type KeyRequest, UNKNOWN_KEY_MS } from "./types.ts";

/**
 * Key hashes this isolate has seen answered: as an active key (true), or as matching no key, until a minute
 * after its object said so (a number). A hash not seen yet is not even asked about once this isolate knows the client
 * IP's bucket to be empty (src/pipeline/admission.ts), so a flood of made-up keys from such a client costs no call.
 */
const seenKeys = isolateMap<string, true | number>();

/** True when this isolate has seen the hash answered, as a key or as matching none (within the minute it remembers that). */
export function isSeenKey(keyHash: string): boolean {
  const seen = seenKeys.get(keyHash);
  return seen === true || (seen !== undefined && Date.now() < seen);
}

/** A key's object, named by the key's hash (as since before the v5 rename: the same ids, the same storage). */
const keyObject = (env: Env, keyHash: string) => env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(keyHash));

/** What admitKey may answer: never "unchecked" when the object may look the key up. */
type AdmissionAnswer<LookUp extends boolean> = LookUp extends true ? CheckedAdmission : KeyAdmission;

/**
 * Admission for an API key, named by its hash: the key object's answer as it came (its work, D1 reads included, counted in `work`);
 * a hash remembered as matching no key is answered without a call. `lookUp`: see ApiKeyObject.admitKey.
 */
export async function admitKey<LookUp extends boolean>(
  env: Env,
  keyHash: string,
  work: WorkMeter,
  request: KeyRequest,
  lookUp: { lookUp: LookUp },
): Promise<AdmissionAnswer<LookUp>> {
  const unknownUntil = seenKeys.get(keyHash);
  if (typeof unknownUntil === "number") {
    if (Date.now() < unknownUntil) return { status: "unknown" } as AdmissionAnswer<LookUp>;
    seenKeys.delete(keyHash);
  }
  // Typed here: the stub's answer is a union of promises, one per status, which inference does not join.
  const result = await work.called<KeyAdmission & ObjectAnswer>(keyObject(env, keyHash).admitKey(keyHash, request, lookUp), "key");
  if (result.status === "unknown") remember(seenKeys, keyHash, Date.now() + UNKNOWN_KEY_MS);
  else if (result.status === "active" || result.status === "forbidden") remember(seenKeys, keyHash, true);
  else if (result.status !== "unchecked") seenKeys.delete(keyHash);
  // The object answers "unchecked" only when told not to look the key up.
  return result as AdmissionAnswer<LookUp>;
}

/**
 * Whether the key (by its hash) would still be admitted for `request`, without counting a request: one call to its
 * object, which reads D1 only if it was evicted and never saw the key since.
 */
export function keyStillAdmits(env: Env, keyHash: string, request: KeyRequest): Promise<{ admits: boolean } & ObjectAnswer> {
  return keyObject(env, keyHash).stillAdmits(keyHash, request);
}

export function keyObjectControl(env: Env, work: WorkMeter): KeyObjectControl {
  const called = <T extends ObjectAnswer>(answer: Promise<T>) => work.called(answer, "key");
  return {
    async revoke(key) {
      await called(keyObject(env, key.keyHash).revoke(key.id, key.accountId));
    },
    async expire(keyHash, expiresAt) {
      await called(keyObject(env, keyHash).expire(keyHash, expiresAt));
    },
    async usage(keyHash, span) {
      return (await called(keyObject(env, keyHash).usageBuckets(span))).buckets;
    },
    async refresh(keyHash) {
      await called(keyObject(env, keyHash).refresh(keyHash));
    },
    async setLimits(keyHashes, limits) {
      const limit = pLimit(MAX_OPEN_CONNECTIONS);
      const pushed = await Promise.allSettled(keyHashes.map((hash) => limit(() => called(keyObject(env, hash).setLimits(limits)))));
      return keyHashes.filter((_, i) => pushed[i]!.status === "rejected");
    },
  };
}
