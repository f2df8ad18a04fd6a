import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { hashApiKey } from "../../src/auth/api-key.ts";
import type { RateLimiter } from "../../src/rate-limit/rate-limiter.ts";
import { accountWithKey } from "../helpers/keys.ts";

const T0 = Date.parse("2030-07-01T09:00:10Z");
beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(T0);
});
afterEach(() => vi.useRealTimers());

/**
 * What usage counting costs the key's object: SQL statements per decision, counted at the object's
 * own SqlStorage. Before usage was counted, an admission ran 3 (the minute log insert and an upsert
 * for each of the hour and day counters) and a refusal none.
 */
it("an admission runs 3 SQL statements and a refusal 1; folding old usage adds none until it is due", async () => {
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
    const nextMinute = await run(); // the minute log slides: one delete
    vi.setSystemTime(T0 + 26 * 3_600_000);
    const dayLater = await run(); // the first minutes are an hour past the 24 h window: a fold (5 statements and a read)
    const next = await run();
    return { first, admitted, refused, nextMinute, dayLater, next };
  });
  expect(statements.admitted).toEqual([true, 3]);
  expect(statements.refused).toEqual([false, 1]);
  expect(statements.nextMinute).toEqual([true, 1 + 3]);
  expect(statements.first).toEqual([true, 1 + 3]);
  expect(statements.dayLater).toEqual([true, 1 + 6 + 3]);
  expect(statements.next).toEqual([true, 3]);
});
