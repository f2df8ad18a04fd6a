import pLimit from "p-limit";
import type { KeyObjectControl } from "../api-keys/object/types.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import type { Database } from "../platform/db.ts";
import { logger } from "../platform/log.ts";

/**
 * A plan change pushes the new limits to every key's object before it answers (src/accounts/service.ts). An object
 * it cannot reach is noted here, and the every-minute cron asks each noted object to read its key from D1 again
 * (src/api-keys/object/key-object.ts refresh), so that key runs on the new plan from the next cron run, about a minute
 * later at most, while a key's admission keeps costing no D1 read. A note stays until its object has been reached.
 */

/** Noted objects the cron asks per run, 6 at a time (as many as the plan change itself calls). */
const RETRIES_PER_RUN = 100;

const log = logger("plan-pushes");

export async function noteUnreachedKeys(db: Database, keyHashes: readonly string[]): Promise<void> {
  log.warn("plan change not pushed to every key; the cron retries", { keys: keyHashes.length });
  await db.$client
    .prepare(
      // "WHERE true": SQLite's parser needs it between an INSERT's SELECT and its ON CONFLICT.
      `INSERT INTO unreached_plan_pushes (key_hash, noted_at) SELECT value, ? FROM json_each(?) WHERE true
       ON CONFLICT (key_hash) DO UPDATE SET noted_at = excluded.noted_at`,
    )
    .bind(Date.now(), JSON.stringify(keyHashes))
    .run();
}

/** The cron's retry: each noted key's object reads its key again; a note goes once that worked (and was not noted again meanwhile). */
export async function retryPlanPushes(db: Database, keyObjects: KeyObjectControl): Promise<number> {
  const { results: noted } = await db.$client
    .prepare("SELECT key_hash, noted_at FROM unreached_plan_pushes ORDER BY noted_at LIMIT ?")
    .bind(RETRIES_PER_RUN)
    .all<{ key_hash: string; noted_at: number }>();
  const limit = pLimit(MAX_OPEN_CONNECTIONS);
  const retried = await Promise.allSettled(noted.map((note) => limit(() => keyObjects.refresh(note.key_hash))));
  const reached = noted.filter((_, i) => retried[i]!.status === "fulfilled");
  if (reached.length > 0)
    await db.$client
      .prepare(
        `DELETE FROM unreached_plan_pushes WHERE (key_hash, noted_at) IN
           (SELECT json_extract(value, '$.key_hash'), json_extract(value, '$.noted_at') FROM json_each(?))`,
      )
      .bind(JSON.stringify(reached))
      .run();
  if (reached.length < noted.length)
    log.warn("plan push still not delivered; the next run retries", { keys: noted.length - reached.length });
  return reached.length;
}
