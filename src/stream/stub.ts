import pLimit from "p-limit";
import type { KeyState } from "../api-keys/object/types.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import type { Database } from "../platform/db.ts";
import { fnv1a } from "../platform/hash.ts";
import { logger } from "../platform/log.ts";
import { type ObjectAnswer, WorkMeter } from "../platform/metered.ts";
import type { StreamHub } from "./hub.ts";
import { STREAM_HUB_COUNT } from "./limits.ts";

const log = logger("stream-hub");

/**
 * The way to the event stream's hubs (src/stream/hub.ts): which hub holds an account's streams, and the push a key's
 * object makes when its key changes (with the cron's retry of a push that failed).
 */

const hubNamed = (env: Pick<Env, "STREAM_HUB">, index: number) => env.STREAM_HUB.get(env.STREAM_HUB.idFromName(`hub:${index}`));

/** The hub that holds the account's streams (a hash of its id, so the same account always meets the same hub). */
export const hubOf = (env: Pick<Env, "STREAM_HUB">, accountId: string): DurableObjectStub<StreamHub> =>
  hubNamed(env, fnv1a(accountId) % STREAM_HUB_COUNT);

/** Every hub: a publish reaches them all (any account's stream may match a catalogue event). */
export const everyHub = (env: Pick<Env, "STREAM_HUB">): DurableObjectStub<StreamHub>[] =>
  Array.from({ length: STREAM_HUB_COUNT }, (_, index) => hubNamed(env, index));

/** Noted pushes the cron makes per run, 6 at a time. */
const RETRIES_PER_RUN = 100;

type KeyChange = { keyId: string; active: boolean; expiresAt: number | null };

/**
 * A key's object stored a change to its key (a revocation, a leak, a rotation's expiry, new restrictions or limits):
 * the account's hub closes the key's open streams that the key no longer admits, and tells the others of a new
 * expiry. A push that fails is made once more; one still failing is noted in D1 (unreached_stream_pushes), and the
 * every-minute cron pushes it again (retryStreamPushes) until its hub takes it: a narrowed key's streams end within
 * about a minute of the hub coming back, not only at the end of their lifetime. The note's D1 write is the change's work.
 */
export async function keyStreamsChanged(env: Pick<Env, "STREAM_HUB" | "DB">, key: KeyState): Promise<ObjectAnswer> {
  const change: KeyChange = {
    keyId: key.keyId,
    active: key.status === "active",
    expiresAt: key.status === "active" ? key.expiresAt : null,
  };
  const push = () => hubOf(env, key.accountId).keyChanged(change);
  try {
    return await push().catch(() => push());
  } catch (error) {
    log.warn("key change not pushed to its streams; the cron pushes it again", { key_id: key.keyId, error: String(error) });
    const work = new WorkMeter();
    await noteUnreachedPush(work.database(env.DB), key.accountId, change).catch((noteError: unknown) =>
      log.error("key change neither pushed to its streams nor noted", { key_id: key.keyId, error: String(noteError) }),
    );
    return { work: work.counts() };
  }
}

/**
 * One note per key: a later failed change replaces its state, keeping what narrows most (a key once inactive stays so,
 * the earliest expiry); the hub asks the key's object about each stream anyway, so a note never widens a stream.
 */
function noteUnreachedPush(db: Database, accountId: string, { keyId, active, expiresAt }: KeyChange) {
  return db.$client
    .prepare(
      `INSERT INTO unreached_stream_pushes (key_id, account_id, active, expires_at, noted_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (key_id) DO UPDATE SET active = active AND excluded.active, noted_at = excluded.noted_at,
         expires_at = CASE WHEN expires_at IS NULL THEN excluded.expires_at WHEN excluded.expires_at IS NULL THEN expires_at
           ELSE min(expires_at, excluded.expires_at) END`,
    )
    .bind(keyId, accountId, active ? 1 : 0, expiresAt, Date.now())
    .run();
}

/** The cron's retry: each noted change pushed to its hub again; a note goes once its hub took it (and it was not noted again meanwhile). */
export async function retryStreamPushes(db: Database, env: Pick<Env, "STREAM_HUB">, work: WorkMeter): Promise<number> {
  const { results: noted } = await db.$client
    .prepare("SELECT key_id, account_id, active, expires_at, noted_at FROM unreached_stream_pushes ORDER BY noted_at LIMIT ?")
    .bind(RETRIES_PER_RUN)
    .all<{ key_id: string; account_id: string; active: number; expires_at: number | null; noted_at: number }>();
  const pushed = await pLimit(MAX_OPEN_CONNECTIONS).map(noted, (note) =>
    work.called(hubOf(env, note.account_id).keyChanged({ keyId: note.key_id, active: note.active === 1, expiresAt: note.expires_at })).then(
      () => true,
      () => false,
    ),
  );
  const reached = noted.filter((_, i) => pushed[i]).map((note) => ({ key_id: note.key_id, noted_at: note.noted_at }));
  if (reached.length > 0)
    await db.$client
      .prepare(
        `DELETE FROM unreached_stream_pushes WHERE (key_id, noted_at) IN
           (SELECT value ->> 'key_id', value ->> 'noted_at' FROM json_each(?))`,
      )
      .bind(JSON.stringify(reached))
      .run();
  if (reached.length < noted.length)
    log.warn("key change still not pushed to its streams; the next run retries", { keys: noted.length - reached.length });
  return reached.length;
}
