import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it, vi } from "vitest";
import { hashApiKey } from "../../src/auth/api-key.ts";
import { RateLimiter } from "../../src/rate-limit/rate-limiter.ts";
import { accountWithKey } from "../helpers/keys.ts";
import { fakeDateAt } from "../helpers/clock.ts";

const T0 = Date.parse("2030-07-01T09:00:10Z");
fakeDateAt(T0);

/**
 * What a decision costs the key's object: SQL statements, counted at the object's own SqlStorage.
 * Everything a decision counts (minute log, hour and day counters, this minute's usage) is one row,
 * so an admission and a refusal each run one statement. Before, an admission ran 3 (a minute-log
 * insert, the counters, a usage upsert) and a delete when the window slid.
 */
it("an admission runs 1 SQL statement and a refusal 1; a new minute adds one, folding old usage adds none until it is due", async () => {
  const { key } = await accountWithKey("free");
  const keyHash = await hashApiKey(key);
  const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(keyHash));
  const statements = await runInDurableObject(stub, async (object: RateLimiter, state) => {
    const sql = state.storage.sql;
    const exec = sql.exec.bind(sql);
    let count = 0;
    sql.exec = ((query: string, ...bindings: unknown[]) => {
      count++;
      return exec(query, ...bindings);
    }) as typeof sql.exec;
    const run = async () => {
      count = 0;
      const result = await object.admitKey(keyHash);
      return [result.status === "active" && result.decision.allowed, count] as const;
    };
    const first = await run(); // loads the key and stores its state
    const admitted = await run();
    for (let i = 0; i < 8; i++) await run();
    const refused = await run();
    vi.setSystemTime(T0 + 60_000);
    const nextMinute = await run(); // the finished minute's usage becomes a row
    vi.setSystemTime(T0 + 26 * 3_600_000);
    const dayLater = await run(); // a new minute, and the first minutes are an hour past the 24 h window: a fold (5 statements and a read)
    const next = await run();
    return { first, admitted, refused, nextMinute, dayLater, next };
  });
  expect(statements.admitted).toEqual([true, 1]);
  expect(statements.refused).toEqual([false, 1]);
  expect(statements.nextMinute).toEqual([true, 1 + 1]);
  expect(statements.first).toEqual([true, 1 + 1]); // and the key's state, stored once
  expect(statements.dayLater).toEqual([true, 1 + 6 + 1]);
  expect(statements.next).toEqual([true, 1]);
});

it("reads counters stored in the earlier per-row format once, then drops it: a deploy hands out nothing twice", async () => {
  const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName("ip:legacy-format"));
  const after = await runInDurableObject(stub, (_object: RateLimiter, state) => {
    const sql = state.storage.sql;
    sql.exec("DELETE FROM state");
    sql.exec("CREATE TABLE minute_log (at INTEGER NOT NULL); CREATE TABLE counters (period TEXT PRIMARY KEY, start INTEGER NOT NULL, count INTEGER NOT NULL)");
    for (let i = 0; i < 10; i++) sql.exec("INSERT INTO minute_log (at) VALUES (?)", T0 - 1_000 * i);
    sql.exec("INSERT INTO counters VALUES ('hour', ?, 10), ('day', ?, 10)", T0 - (T0 % 3_600_000), T0 - (T0 % 86_400_000));
    const revived = new RateLimiter(state, env); // as after a deploy: the object wakes on the old storage
    const decision = revived.admit({ per_minute: 10, per_hour: 600, per_day: 14_400 });
    const oldTables = sql.exec("SELECT name FROM sqlite_master WHERE name IN ('minute_log', 'counters')").toArray();
    return { allowed: decision.allowed, oldTables, log: JSON.parse(String(sql.exec("SELECT log FROM state").one().log)) as number[] };
  });
  expect(after.allowed).toBe(false); // the 10 requests of the last minute still count
  expect(after.oldTables).toEqual([]);
  expect(after.log).toHaveLength(10);
});

it("adds last_used to a state table stored before it, keeping the counts", async () => {
  const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName("ip:state-without-last-used"));
  const after = await runInDurableObject(stub, (_object: RateLimiter, state) => {
    const sql = state.storage.sql;
    sql.exec(`DROP TABLE state; CREATE TABLE state (id INTEGER PRIMARY KEY CHECK (id = 1), log TEXT NOT NULL,
      hour_start INTEGER NOT NULL, hour_count INTEGER NOT NULL, day_start INTEGER NOT NULL, day_count INTEGER NOT NULL,
      usage_minute INTEGER NOT NULL, usage_admitted INTEGER NOT NULL, usage_refused INTEGER NOT NULL)`);
    const log = Array.from({ length: 9 }, (_, i) => T0 - 1_000 * i);
    sql.exec("INSERT INTO state VALUES (1, ?, ?, 9, ?, 9, 0, 0, 0)", JSON.stringify(log), T0 - (T0 % 3_600_000), T0 - (T0 % 86_400_000));
    const revived = new RateLimiter(state, env); // as after a deploy: the object wakes on the old storage
    const limits = { per_minute: 10, per_hour: 600, per_day: 14_400 };
    const decisions = [revived.admit(limits).allowed, revived.admit(limits).allowed];
    return { decisions, row: sql.exec("SELECT hour_count, last_used FROM state").one() };
  });
  expect(after.decisions).toEqual([true, false]); // 9 stored + 1 admitted = the limit of 10
  expect(after.row).toEqual({ hour_count: 10, last_used: 0 });
});
