import type { ObjectAnswer } from "../../platform/metered.ts";
import { MeteredObject } from "../../platform/metered-object.ts";
import { FLUSH_EVERY_MS, LAST_USED_SHARDS, MARK_EVERY_MS, MARKS_PER_STATEMENT } from "./last-used-schedule.ts";

export { MARK_EVERY_MS };

/**
 * `last_used_at` off D1's per-key path. A key's object marks a use at most every MARK_EVERY_MS (the time is
 * kept in its state row, so eviction does not re-mark) and hands the mark to one of LAST_USED_SHARDS
 * objects, picked by the key id; each shard keeps the marks it was handed in its storage and writes them
 * all to D1 with one statement (a JSON array bound as one value), at most every FLUSH_EVERY_MS. So D1's
 * statements for `last_used_at` grow with the number of shards and with time (≤ 64 every 45 s), never with
 * the number of active keys; its rows written are one per mark, at most one per key in use per 14 minutes; and a
 * listing shows a key's last use at most 15 minutes late (14 minutes of marking interval, 45 s of flush delay,
 * and the write).
 */
/** FNV-1a of the key id, so one key's marks always go to the same shard (the newest simply replaces the older). */
export function lastUsedShardOf(keyId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < keyId.length; i++) hash = Math.imul(hash ^ keyId.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % LAST_USED_SHARDS;
}

export const lastUsedShardName = (shard: number) => `last-used:${shard}`;

export function lastUsedLog(env: Env, keyId: string) {
  return env.LAST_USED_LOG.get(env.LAST_USED_LOG.idFromName(lastUsedShardName(lastUsedShardOf(keyId))));
}

const UPDATE_LAST_USED = `UPDATE api_keys SET last_used_at = marks.value FROM json_each(?) AS marks
  WHERE api_keys.id = marks.key AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < marks.value)`;

/** One shard of the marks waiting for D1: a row per key, its newest mark. */
export class LastUsedLog extends MeteredObject {
  private alarmSet = false;
  private flushedAt = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS marks (key_id TEXT PRIMARY KEY, at TEXT NOT NULL) WITHOUT ROWID");
  }

  /** A key's use at `at` (ISO-8601): kept until the next flush, which comes within FLUSH_EVERY_MS. */
  note(keyId: string, at: string): ObjectAnswer {
    this.ctx.storage.sql.exec("INSERT INTO marks VALUES (?, ?) ON CONFLICT (key_id) DO UPDATE SET at = max(at, excluded.at)", keyId, at);
    if (!this.alarmSet) {
      this.alarmSet = true;
      void this.ctx.storage.setAlarm(Math.max(Date.now(), this.flushedAt + FLUSH_EVERY_MS));
    }
    return this.reported({});
  }

  /** A flush is an invocation of its own (`last_used_flush`), its D1 write counted with it. */
  override alarm(): Promise<void> {
    return this.invocation("last_used_flush", () => this.flush());
  }

  /**
   * Writes every mark to D1 in one batch (one statement per 5,000 marks), then forgets the marks it wrote
   * (a mark replaced meanwhile stays for the next flush). Should D1 fail, nothing is forgotten and the
   * alarm is retried.
   */
  private async flush(): Promise<void> {
    this.alarmSet = false;
    const marks = this.ctx.storage.sql.exec<{ key_id: string; at: string }>("SELECT key_id, at FROM marks").toArray();
    if (marks.length === 0) return;
    const chunks: string[] = [];
    for (let i = 0; i < marks.length; i += MARKS_PER_STATEMENT) {
      chunks.push(JSON.stringify(Object.fromEntries(marks.slice(i, i + MARKS_PER_STATEMENT).map((m) => [m.key_id, m.at]))));
    }
    const db = this.meter.d1Binding(this.env.DB);
    const update = db.prepare(UPDATE_LAST_USED);
    await db.batch(chunks.map((chunk) => update.bind(chunk)));
    this.flushedAt = Date.now();
    this.ctx.storage.sql.exec(
      "DELETE FROM marks WHERE (key_id, at) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))",
      JSON.stringify(marks.map((m) => [m.key_id, m.at])),
    );
    if (this.ctx.storage.sql.exec("SELECT 1 FROM marks LIMIT 1").toArray().length > 0) {
      this.alarmSet = true;
      await this.ctx.storage.setAlarm(this.flushedAt + FLUSH_EVERY_MS);
    }
  }
}
