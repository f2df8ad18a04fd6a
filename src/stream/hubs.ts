import type { KeyState } from "../api-keys/object/types.ts";
import { fnv1a } from "../platform/hash.ts";
import { logger } from "../platform/log.ts";
import { type ObjectAnswer, WorkMeter } from "../platform/metered.ts";
import type { StreamHub } from "./hub.ts";
import { STREAM_HUB_COUNT } from "./limits.ts";

/**
 * The way to the event stream's hubs (src/stream/hub.ts): which hub holds an account's streams, and the push a key's
 * object makes when its key changes.
 */

const hubNamed = (env: Pick<Env, "STREAM_HUB">, index: number) => env.STREAM_HUB.get(env.STREAM_HUB.idFromName(`hub:${index}`));

/** The hub that holds the account's streams (a hash of its id, so the same account always meets the same hub). */
export const hubOf = (env: Pick<Env, "STREAM_HUB">, accountId: string): DurableObjectStub<StreamHub> =>
  hubNamed(env, fnv1a(accountId) % STREAM_HUB_COUNT);

/** Every hub: a publish reaches them all (any account's stream may match a catalogue event). */
export const everyHub = (env: Pick<Env, "STREAM_HUB">): DurableObjectStub<StreamHub>[] =>
  Array.from({ length: STREAM_HUB_COUNT }, (_, index) => hubNamed(env, index));

/**
 * A key's object stored a change to its key (a revocation, a leak, a rotation's expiry, new restrictions or limits):
 * the account's hub closes the key's open streams that the key no longer admits, and tells the others of a new
 * expiry. A failure is logged: a stream also ends within its lifetime, and every reconnect is admitted afresh.
 */
export async function keyStreamsChanged(env: Pick<Env, "STREAM_HUB">, key: KeyState): Promise<ObjectAnswer> {
  const change = { keyId: key.keyId, active: key.status === "active", expiresAt: key.status === "active" ? key.expiresAt : null };
  return hubOf(env, key.accountId)
    .keyChanged(change)
    .catch((error: unknown) => {
      logger("stream-hub").error("key change not pushed to its streams", { key_id: key.keyId, error: String(error) });
      return { work: new WorkMeter().counts() };
    });
}
