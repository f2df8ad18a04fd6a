import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { type LastUsedLog, lastUsedShardName, lastUsedShardOf, MARK_EVERY_MS } from "../../src/api-keys/object/last-used.ts";
import { FLUSH_EVERY_MS } from "../../src/api-keys/object/last-used-schedule.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { fakeDateAt } from "../helpers/clock.ts";
import { call, expectJson, workCounts } from "../helpers/http.ts";
import { settled } from "../helpers/settle.ts";

// A fake Date, shared by the worker and its Durable Objects in these tests.
const T0 = Date.parse("2030-04-01T08:00:00Z");
fakeDateAt(T0);
const iso = (ms: number) => new Date(ms).toISOString();

const shard = (n: number) => env.LAST_USED_LOG.get(env.LAST_USED_LOG.idFromName(lastUsedShardName(n)));

/** A shard's D1 write of marks that holds one of `keyIds`' (its statement, and the marks bound to it as JSON). */
const writesMarkOf = (keyIds: readonly string[]) => (statement: D1PreparedStatement) => {
  const { statement: sql, params } = statement as D1PreparedStatement & { statement: string; params: unknown[] };
  return sql.startsWith("UPDATE api_keys SET last_used_at") && keyIds.some((id) => String(params[0]).includes(`"${id}"`));
};

/**
 * How many of `keyIds` a shard holds a mark of (its rows gather several keys' marks each). Only these keys: the test
 * files share this isolate, so a shard may also hold other files' marks.
 */
const heldMarks = (state: DurableObjectState, keyIds: readonly string[]) =>
  state.storage.sql
    .exec<{ held: number }>(
      "SELECT count(DISTINCT marks.key) AS held FROM mark_rows, json_each(mark_rows.marks) AS marks WHERE marks.key IN (SELECT value FROM json_each(?))",
      JSON.stringify(keyIds),
    )
    .one().held;

/**
 * Runs a shard's alarm now, as its schedule would, and reports what it wrote of `keyIds`' marks: how many it held, in
 * how many D1 statements (seen at the binding, which the shards use in this isolate too, and told apart by their SQL
 * and the marks bound to them).
 */
async function flushShard(log: DurableObjectStub<LastUsedLog>, keyIds: readonly string[]): Promise<{ marks: number; statements: number }> {
  const batches = vi.spyOn(env.DB, "batch");
  try {
    return await runInDurableObject(log, async (object: LastUsedLog, state) => {
      const marks = heldMarks(state, keyIds);
      await object.alarm();
      // Only the shard's own statements: other work in this isolate (a snapshot build, a key's usage row) may batch meanwhile.
      const flushes = batches.mock.calls.flatMap(([statements]) => statements).filter(writesMarkOf(keyIds));
      return { marks, statements: flushes.length };
    });
  } finally {
    batches.mockRestore();
  }
}

/** Flushes the shards of these keys (as their alarms would) and adds up what they wrote. */
async function flush(keyIds: string[]) {
  let marks = 0;
  let statements = 0;
  for (const n of new Set(keyIds.map(lastUsedShardOf))) {
    const flushed = await flushShard(shard(n), keyIds);
    marks += flushed.marks;
    statements += flushed.statements;
  }
  return { marks, statements };
}

/**
 * A key's object hands its mark to the shard off the request path: wait until the shards hold all `keyIds`' marks
 * (read, not flushed: a flush while some are still on their way would write a shard twice), then write them.
 */
async function flushWhenMarked(keyIds: string[]) {
  const shards = [...new Set(keyIds.map(lastUsedShardOf))];
  await settled(async () => {
    let held = 0;
    for (const n of shards) {
      held += await runInDurableObject(shard(n), (_, state) => heldMarks(state, keyIds));
    }
    expect(held).toBe(keyIds.length);
  });
  return flush(keyIds);
}

async function lastUsedAt(token: string, keyId: string): Promise<string | null> {
  const keys = (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys as { id: string; last_used_at: string | null }[];
  return keys.find((k) => k.id === keyId)!.last_used_at;
}

describe("last_used_at", () => {
  it("carries the marked use's exact time, with no D1 write on the request path and none again within the mark's interval, evictions included", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "free" });
    expect(await lastUsedAt(token, keyId)).toBeNull();

    expect((await call("GET", "/competitors", { token: key })).status).toBe(200);
    await flushWhenMarked([keyId]);
    expect(await lastUsedAt(token, keyId)).toBe(iso(T0));

    // Within the interval, further use marks nothing, nor does it once the object has been evicted and woken again.
    vi.setSystemTime(T0 + 20_000);
    const seen = await call("GET", "/competitors", { token: key });
    expect(workCounts(seen)).toEqual({ d1: 0, keyDo: 1, otherDo: 0 });
    await evictDurableObject(env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key))));
    vi.setSystemTime(T0 + MARK_EVERY_MS - 1);
    expect((await call("GET", "/competitors", { token: key })).status).toBe(200);
    expect(await flush([keyId])).toEqual({ marks: 0, statements: 0 });
    expect(await lastUsedAt(token, keyId)).toBe(iso(T0));

    // Past it, the next use is marked: the listing is never more than 15 minutes behind the last use (the contract; was a minute).
    vi.setSystemTime(T0 + MARK_EVERY_MS);
    const later = await call("GET", "/competitors", { token: key });
    expect(workCounts(later).d1).toBe(0);
    await flushWhenMarked([keyId]);
    expect(await lastUsedAt(token, keyId)).toBe(iso(T0 + MARK_EVERY_MS));
  });

  it("many keys' uses: at most one D1 statement per shard, none on the requests", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "standard" });
    const keys = [{ id: keyId, key }];
    for (let i = 0; i < 9; i++) keys.push(await addKey(token));
    vi.setSystemTime(T0 + 5_000);
    for (const k of keys) {
      const res = await call("GET", "/competitors", { token: k.key });
      expect(workCounts(res).d1).toBe(1); // the key's state, read once; nothing for last_used_at
    }
    const flushed = await flushWhenMarked(keys.map((k) => k.id));
    expect(flushed.statements).toBe(new Set(keys.map((k) => lastUsedShardOf(k.id))).size);
    const listed = (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys as { last_used_at: string }[];
    expect(listed.map((k) => k.last_used_at)).toEqual(keys.map(() => iso(T0 + 5_000)));
  });

  it("one shard stores 2,000 keys' marks in one row and writes them in one D1 statement; an older mark never replaces a newer one; its alarm flushes", async () => {
    const { sub } = await freshAccount({ plan: "free" });
    const ids = Array.from({ length: 2_000 }, (_, i) => `key_${crypto.randomUUID().replaceAll("-", "")}${i}`);
    const insert = env.DB.prepare(
      "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at, last_used_at) VALUES (?, ?, 'k', 'pda_live_x', ?, 'active', ?, ?)",
    );
    for (let i = 0; i < ids.length; i += 500) {
      await env.DB.batch(
        ids.slice(i, i + 500).map((id) => insert.bind(id, sub, `hash-${id}`, iso(T0 - 1000), id.endsWith("7") ? iso(T0 + 9_000) : null)),
      );
    }
    // A shard of its own: a numbered shard is shared with the other test files' keys, whose rows and real-time
    // alarm would be counted and run here.
    const log = env.LAST_USED_LOG.get(env.LAST_USED_LOG.idFromName(`own-${crypto.randomUUID()}`));
    // As 2,000 keys' objects would hand them, here in one call to keep the test fast: gathered, they take one row.
    const rowsStored = await runInDurableObject(log, async (object: LastUsedLog, state) => {
      await Promise.all(ids.map((id) => object.note(id, iso(T0 + 1_000))));
      return state.storage.sql.exec<{ rows: number }>("SELECT count(*) AS rows FROM mark_rows").one().rows;
    });
    expect(rowsStored).toBe(1);
    expect(await flushShard(log, ids)).toEqual({ marks: 2_000, statements: 1 });
    const rows = (
      await env.DB.prepare("SELECT id, last_used_at FROM api_keys WHERE account_id = ? AND name = 'k'")
        .bind(sub)
        .all<{ id: string; last_used_at: string }>()
    ).results;
    expect(rows).toHaveLength(2_000);
    for (const row of rows) expect(row.last_used_at).toBe(row.id.endsWith("7") ? iso(T0 + 9_000) : iso(T0 + 1_000));

    await log.note(ids[0]!, iso(T0 + 20_000)); // its alarm, armed by its first stored row, writes it
    expect(await runDurableObjectAlarm(log)).toBe(true);
    expect(await flushShard(log, ids)).toEqual({ marks: 0, statements: 0 });
    expect((await env.DB.prepare("SELECT last_used_at FROM api_keys WHERE id = ?").bind(ids[0]).first())!.last_used_at).toBe(
      iso(T0 + 20_000),
    );
  });

  it("a shard evicted between two marks keeps the flush its first mark armed, so a trickle of marks cannot put it off", async () => {
    const log = env.LAST_USED_LOG.get(env.LAST_USED_LOG.idFromName(`evicted-${crypto.randomUUID()}`));
    const armed = (object: DurableObjectStub<LastUsedLog>) => runInDurableObject(object, (_, state) => state.storage.getAlarm());
    await log.note("key_first", iso(T0));
    expect(await armed(log)).toBe(T0 + FLUSH_EVERY_MS);
    await evictDurableObject(log);
    vi.setSystemTime(T0 + 20_000);
    await log.note("key_second", iso(T0 + 20_000));
    expect(await armed(log)).toBe(T0 + FLUSH_EVERY_MS);
    expect(await runDurableObjectAlarm(log)).toBe(true);
    expect(await armed(log)).toBeNull();
  });
});
