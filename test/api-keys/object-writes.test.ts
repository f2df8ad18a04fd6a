import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { lastUsedLog } from "../../src/api-keys/object/last-used.ts";
import { MARK_EVERY_MS } from "../../src/api-keys/object/last-used-schedule.ts";
import type { PlanName } from "../../src/platform/tables.ts";
import { MINUTE_MS } from "../../src/platform/time.ts";
import { PLAN_LIMITS } from "../../src/rate-limit/plans.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { fakeDateAt } from "../helpers/clock.ts";
import { call, expectJson } from "../helpers/http.ts";
import { lastUsedMarkStored } from "../helpers/last-used.ts";
import { settled } from "../helpers/settle.ts";
import { accountToken } from "../helpers/tokens.ts";
import { invocationLog } from "../helpers/work-log.ts";

// A fake Date, shared by the worker and its Durable Objects. T0 is 10 s into an hour.
const T0 = Date.parse("2030-05-06T09:00:10Z");
fakeDateAt(T0);

const keyObject = async (key: string) => env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));

/**
 * Counts the storage rows the key's object and its `last_used_at` shard write while `run` runs, from their SQL
 * cursors' own `rowsWritten` (every statement an object executes goes through its SqlStorage's `exec`, which is
 * wrapped here for the span). Only those two are counted: the files of a test run share this isolate, and an earlier
 * file's objects may write meanwhile.
 */
async function rowsWrittenBy(key: string, keyId: string, run: () => Promise<void>): Promise<{ key: number; shard: number }> {
  const storageOf = (stub: DurableObjectStub) => runInDurableObject(stub, (_object, state) => state.storage.sql);
  const [keySql, shardSql] = await Promise.all([storageOf(await keyObject(key)), storageOf(lastUsedLog(env, keyId))]);
  type Exec = (this: SqlStorage, query: string, ...bindings: unknown[]) => SqlStorageCursor<Record<string, SqlStorageValue>>;
  const prototype = Object.getPrototypeOf(keySql) as { exec: Exec };
  const exec = prototype.exec;
  const cursors: { storage: SqlStorage; cursor: SqlStorageCursor<Record<string, SqlStorageValue>> }[] = [];
  prototype.exec = function (query, ...bindings) {
    const cursor = exec.call(this, query, ...bindings);
    cursors.push({ storage: this, cursor });
    return cursor;
  };
  try {
    await run();
    await lastUsedMarkStored(key, keyId);
  } finally {
    prototype.exec = exec;
  }
  const sum = (storage: SqlStorage) =>
    cursors.filter((c) => c.storage === storage).reduce((total, { cursor }) => total + cursor.rowsWritten, 0);
  return { key: sum(keySql), shard: sum(shardSql) };
}

const get = (key: string) => call("GET", "/competitors", { token: key });

describe("the key object's storage writes", () => {
  it("100 admitted requests within a minute write a row per reserved block (at most 10), and the usage stays exact", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "premium" });
    expect((await get(key)).status).toBe(200); // the object reads the key once
    const { key: written } = await rowsWrittenBy(key, keyId, async () => {
      for (let i = 0; i < 100; i++) {
        vi.setSystemTime(T0 + 100 + i * 400);
        expect((await get(key)).status).toBe(200);
      }
      vi.setSystemTime(T0 + MINUTE_MS + 50_000); // the next minute: one more decision
      expect((await get(key)).status).toBe(200);
    });
    // Blocks sized by the last minute: 1, 2, 4, … (src/api-keys/object/reservations.ts); a row each (7 here).
    expect(written).toBeLessThanOrEqual(10);
    const usage = await expectJson(await call("GET", `/api-keys/${keyId}/usage?granularity=minute`, { token }), 200);
    const counted = usage.buckets.filter((b) => b.admitted + b.refused > 0);
    expect(counted.map((b) => b.admitted)).toEqual([101, 1]);
  });

  it("a key used every 100 s for 26 hours writes at most 1.2 rows per request, evictions included", async () => {
    const { sub, key, keyId } = await freshAccount({ plan: "standard" });
    expect((await get(key)).status).toBe(200);
    const requests = 26 * 36; // past the day of minutes, so the usage log's folding runs too
    let written = 0;
    let shardRows = 0;
    // Counted a stretch at a time, as each eviction brings a new instance (and its own SqlStorage).
    for (let stretch = 0; stretch < requests / 12; stretch++) {
      const rows = await rowsWrittenBy(key, keyId, async () => {
        for (let i = stretch * 12 + 1; i <= (stretch + 1) * 12; i++) {
          vi.setSystemTime(T0 + i * 100_000);
          expect((await get(key)).status).toBe(200);
        }
      });
      written += rows.key;
      shardRows += rows.shard;
      await evictDurableObject(await keyObject(key));
    }
    expect(written / requests).toBeLessThanOrEqual(1.2);
    // A mark at most every MARK_EVERY_MS, each one row in its shard (and one more when the shard's flush deletes it).
    expect(shardRows).toBeGreaterThan(0);
    expect(shardRows).toBeLessThanOrEqual(Math.ceil((requests * 100_000) / MARK_EVERY_MS) + 1);
    const token = await accountToken(sub); // the first has expired meanwhile
    const hours = await expectJson(await call("GET", `/api-keys/${keyId}/usage?granularity=hour`, { token }), 200);
    const total = hours.buckets.reduce((sum, b) => sum + b.admitted, 0);
    expect(total).toBe(requests + 1);
    // 36 an hour, and the minutes the last 24 hours keep, one request each.
    expect(hours.buckets.filter((b) => b.admitted > 0).map((b) => b.admitted)).toEqual([...Array(26).fill(36), 1]);
    const minutes = await expectJson(await call("GET", `/api-keys/${keyId}/usage?granularity=minute`, { token }), 200);
    const lastDay = minutes.buckets.filter((b) => b.admitted > 0);
    const windowFrom = Date.parse(minutes.buckets[0]!.start);
    const times = Array.from({ length: requests + 1 }, (_, i) => T0 + i * 100_000);
    expect(lastDay.map((b) => Date.parse(b.start))).toEqual(times.filter((t) => t >= windowFrom).map((t) => t - (t % MINUTE_MS)));
    expect(lastDay.every((b) => b.admitted === 1)).toBe(true);
  }, 120_000);

  it("an hour met again after the clock steps back adds its counts to the stored hour, minute by minute", async () => {
    const HOUR = 3_600_000;
    vi.setSystemTime(T0 + 5 * HOUR);
    const { sub, key, keyId } = await freshAccount({ plan: "premium" });
    const at = async (time: number) => {
      vi.setSystemTime(time);
      expect((await get(key)).status).toBe(200);
    };
    await at(T0 + 5 * HOUR + 60_000); // minute 1 of hour 5 (T0's hour + 5), twice
    await at(T0 + 5 * HOUR + 61_000);
    await at(T0 + 6 * HOUR); // hour 5 ends: written as a row
    await at(T0 + 5 * HOUR + 62_000); // the clock steps back into hour 5: minute 1 again, and minute 2
    await at(T0 + 5 * HOUR + 120_000);
    await at(T0 + 6 * HOUR + 1000); // hour 5 ends again: added to its row
    vi.setSystemTime(T0 + 6 * HOUR + 2000);
    const token = await accountToken(sub);
    const minutes = await expectJson(await call("GET", `/api-keys/${keyId}/usage?granularity=minute`, { token }), 200);
    const counted = minutes.buckets.filter((b) => b.admitted > 0).map((b) => [b.start, b.admitted]);
    const minute = (offset: number) => new Date(T0 - (T0 % MINUTE_MS) + offset).toISOString();
    expect(counted).toEqual([
      [minute(5 * HOUR + 60_000), 3],
      [minute(5 * HOUR + 120_000), 1],
      [minute(6 * HOUR), 2],
    ]);
  });
});

/**
 * A key at its plan's steady rate (its limit per minute, evenly spaced) for `minutes`, across an hour's end, so the
 * span holds `last_used` marks and an hour's usage row: every row written by every object its requests reach, from
 * the final tallies (the requests', the key's alarms', the marks' hand-over to their shard and the shard's flush), per
 * admitted request. Alarms are run when the (fake) clock passes the time the object set them for.
 */
async function rowsPerAdmittedAtSteadyRate(plan: PlanName, minutes: number): Promise<number> {
  const start = Date.parse("2030-05-06T10:00:00Z") - (minutes / 2) * MINUTE_MS;
  vi.setSystemTime(start - MINUTE_MS);
  const { key, keyId } = await freshAccount({ plan });
  expect((await get(key)).status).toBe(200); // the object reads the key, and marks its first use
  const stub = await keyObject(key);
  const runDueAlarm = async (object: DurableObjectStub) => {
    const due = await runInDurableObject(object, (_object, state) => state.storage.getAlarm());
    if (due !== null && due <= Date.now()) await runDurableObjectAlarm(object);
  };
  const log = invocationLog();
  const spacing = MINUTE_MS / PLAN_LIMITS[plan].per_minute;
  let admitted = 0;
  let second = 0;
  for (let at = start; at < start + minutes * MINUTE_MS; at += spacing) {
    vi.setSystemTime(at);
    if (Math.floor(at / 1000) !== second) {
      second = Math.floor(at / 1000);
      await runDueAlarm(stub);
    }
    const res = await get(key);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    admitted++;
  }
  vi.setSystemTime(start + (minutes + 1) * MINUTE_MS);
  await runDueAlarm(stub);
  await runDurableObjectAlarm(lastUsedLog(env, keyId)); // the shard's flush, which deletes the marks it wrote
  await settled(() => expect(log.lines.filter((line) => line.request_id !== undefined).length).toBeGreaterThanOrEqual(admitted));
  return log.lines.reduce((rows, line) => rows + line.doRowsWritten, 0) / admitted;
}

describe("object rows written per admitted request at each plan's steady rate", () => {
  // An hour at Free, whose marks and hour rows weigh most per request; shorter at the others (as many requests as it takes).
  const minutes = { free: 60, standard: 30, premium: 10 } as const;
  for (const plan of ["free", "standard", "premium"] as const) {
    it(`${plan}: at most 0.25 over ${minutes[plan]} minutes`, async () => {
      const rows = await rowsPerAdmittedAtSteadyRate(plan, minutes[plan]);
      console.info(`${plan}: ${rows.toFixed(3)} object rows written per admitted request`);
      expect(rows).toBeLessThanOrEqual(0.25);
    }, 120_000);
  }
});
