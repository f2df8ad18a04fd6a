import type { ObjectAnswer } from "../../platform/metered.ts";
import { MeteredObject } from "../../platform/metered-object.ts";
import { FLUSH_EVERY_MS, LAST_USED_SHARDS, MARK_EVERY_MS, MARKS_PER_STATEMENT, WRITE_EVERY_MS } from "./last-used-schedule.ts";

export { MARK_EVERY_MS };

/**
 * `last_used_at` off D1's per-key path. A key's object marks a use at most every MARK_EVERY_MS (the time is
 * kept in its state row, so eviction does not re-mark) and hands the mark to one of LAST_USED_SHARDS
 * objects, picked by the key id. A shard gathers the marks handed to it for WRITE_EVERY_MS and stores them as one row
 * (storage is billed by the row: at the model's load a shard is handed ~19 marks a second, so one row a second holds
 * them all), answering each mark once that row is written; and it writes every mark it holds to D1 with one
 * statement (a JSON array bound as one value), at most every FLUSH_EVERY_MS. So D1's statements for `last_used_at`
 * grow with the number of shards and with time (≤ 64 every 45 s), never with the number of active keys; its rows
 * written are one per mark, at most one per key in use per 14 minutes; and a listing shows a key's last use at most
 * 15 minutes late (14 minutes of marking interval, a second of gathering, 45 s of flush delay, and the write).
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

/** One shard of the marks waiting for D1: rows of marks gathered together, each a key's newest mark of its time. */
export class LastUsedLog extends MeteredObject {
  /** Marks handed to the shard and not yet stored: each key's newest. */
  private gathering = new Map<string, string>();
  /** The write that will store `gathering`, once WRITE_EVERY_MS has passed since its first mark. */
  private stored: Promise<void> | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS mark_rows (id INTEGER PRIMARY KEY, marks TEXT NOT NULL)");
    // A shard that held a row per key (before marks were gathered) keeps those marks, as one row of the new kind.
    const legacy = ctx.storage.sql.exec("SELECT 1 FROM sqlite_schema WHERE name = 'marks'").toArray().length > 0;
    if (legacy) {
      ctx.storage.sql.exec("INSERT INTO mark_rows (marks) SELECT json_group_object(key_id, at) FROM marks HAVING count(*) > 0");
      ctx.storage.sql.exec("DROP TABLE marks");
    }
  }

  /**
   * A key's use at `at` (ISO-8601), answered once it is stored with the others gathered meanwhile: kept until the next
   * flush, which comes within FLUSH_EVERY_MS. Should the write fail, every mark it held is refused (each key marks again).
   */
  async note(keyId: string, at: string): Promise<ObjectAnswer> {
    keepNewest(this.gathering, keyId, at);
    this.stored ??= scheduler.wait(WRITE_EVERY_MS).then(() => this.invocation("last_used_write", () => this.storeGathered()));
    await this.stored;
    return this.reported({});
  }

  /**
   * Stores the gathered marks as one row, and arms the flush, FLUSH_EVERY_MS on, if it is not armed yet: asked of the
   * storage, not remembered, as a shard evicted between two marks would otherwise put its flush off at every wake.
   */
  private async storeGathered(): Promise<void> {
    const marks = this.gathering;
    this.gathering = new Map();
    this.stored = undefined;
    this.ctx.storage.sql.exec("INSERT INTO mark_rows (marks) VALUES (?)", JSON.stringify(Object.fromEntries(marks)));
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + FLUSH_EVERY_MS);
  }

  /** A flush is an invocation of its own (`last_used_flush`), its D1 write counted with it. */
  override alarm(): Promise<void> {
    return this.invocation("last_used_flush", () => this.flush());
  }

  /**
   * Writes every stored mark to D1 in one batch (one statement per 5,000 keys; a key's newest mark where rows hold
   * several), then deletes the rows it wrote (a row stored meanwhile stays for the next flush). Should D1 fail,
   * nothing is deleted and the alarm is retried.
   */
  private async flush(): Promise<void> {
    const rows = this.ctx.storage.sql.exec<{ id: number; marks: string }>("SELECT id, marks FROM mark_rows ORDER BY id").toArray();
    if (rows.length === 0) return;
    const newest = new Map<string, string>();
    for (const row of rows) {
      for (const [keyId, at] of Object.entries(JSON.parse(row.marks) as Record<string, string>)) keepNewest(newest, keyId, at);
    }
    const marks = [...newest];
    const chunks: string[] = [];
    for (let i = 0; i < marks.length; i += MARKS_PER_STATEMENT) {
      chunks.push(JSON.stringify(Object.fromEntries(marks.slice(i, i + MARKS_PER_STATEMENT))));
    }
    const db = this.meter.d1Binding(this.env.DB);
    const update = db.prepare(UPDATE_LAST_USED);
    await db.batch(chunks.map((chunk) => update.bind(chunk)));
    this.ctx.storage.sql.exec("DELETE FROM mark_rows WHERE id <= ?", rows.at(-1)!.id);
    if (this.ctx.storage.sql.exec("SELECT 1 FROM mark_rows LIMIT 1").toArray().length > 0)
      await this.ctx.storage.setAlarm(Date.now() + FLUSH_EVERY_MS);
  }
}

/** A key's mark kept unless the map holds a newer one (ISO-8601 instants compare as strings). */
function keepNewest(marks: Map<string, string>, keyId: string, at: string): void {
  const held = marks.get(keyId);
  if (held === undefined || held < at) marks.set(keyId, at);
}
