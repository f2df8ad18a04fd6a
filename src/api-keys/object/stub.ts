import pLimit from "p-limit";
import { remember } from "../../platform/bounded-map.ts";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import { isolateMap } from "../../platform/isolate-memory.ts";
import { type ObjectWrites, type RequestWork, withObjectWrites } from "../../platform/metered.ts";
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
 * Admission for an API key, named by its hash: the key object's answer as it came (its D1 reads added to `work`);
 * a hash remembered as matching no key is answered without a call. `lookUp`: see ApiKeyObject.admitKey.
 */
export async function admitKey<LookUp extends boolean>(
  env: Env,
  keyHash: string,
  work: RequestWork,
  request: KeyRequest,
  lookUp: { lookUp: LookUp },
): Promise<AdmissionAnswer<LookUp>> {
  const unknownUntil = seenKeys.get(keyHash);
  if (typeof unknownUntil === "number") {
    if (Date.now() < unknownUntil) return { status: "unknown", d1Queries: 0 } as AdmissionAnswer<LookUp>;
    seenKeys.delete(keyHash);
  }
  work.keyObjectCalls++;
  const result: KeyAdmission = withObjectWrites(work, await keyObject(env, keyHash).admitKey(keyHash, request, lookUp));
  work.d1 += result.d1Queries;
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
export function keyStillAdmits(env: Env, keyHash: string, request: KeyRequest): Promise<{ admits: boolean } & ObjectWrites> {
  return keyObject(env, keyHash).stillAdmits(keyHash, request);
}

export function keyObjectControl(env: Env, work: RequestWork): KeyObjectControl {
  const counted = (keyHash: string) => {
    work.keyObjectCalls++;
    return keyObject(env, keyHash);
  };
  return {
    async revoke(key) {
      withObjectWrites(work, await counted(key.keyHash).revoke(key.id, key.accountId));
    },
    async expire(keyHash, expiresAt) {
      withObjectWrites(work, await counted(keyHash).expire(keyHash, expiresAt));
    },
    usage(keyHash, span) {
      return counted(keyHash).usageBuckets(span);
    },
    async refresh(keyHash) {
      work.d1 += withObjectWrites(work, await counted(keyHash).refresh(keyHash)).d1Queries;
    },
    async setLimits(keyHashes, limits) {
      const limit = pLimit(MAX_OPEN_CONNECTIONS);
      const pushed = await Promise.allSettled(
        keyHashes.map((hash) => limit(async () => withObjectWrites(work, await counted(hash).setLimits(limits)))),
      );
      return keyHashes.filter((_, i) => pushed[i]!.status === "rejected");
    },
  };
}
