import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it, vi } from "vitest";
import { hashApiKey } from "../../src/api-keys/format.ts";
import type { ApiKeyObject } from "../../src/index.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { fakeDateAt } from "../helpers/clock.ts";

const T0 = Date.parse("2030-07-01T09:00:10Z");
fakeDateAt(T0);

/**
 * What a decision costs the key's object: SQL statements, counted at the object's own SqlStorage.
 * Everything a decision counts (minute log, hour and day counters, this hour's usage by minute) is one row,
 * so an admission runs one statement. A refusal within a second of the last write runs none: the
 * alarm at that second's end writes it (so hammering a refused key cannot flood its object with writes).
 */
it("an admission runs 1 SQL statement and a refusal none within the second; a new hour adds one, folding old usage adds none until it is due", async () => {
  const { key } = await freshAccount({ plan: "free" });
  const keyHash = await hashApiKey(key);
  const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(keyHash));
  const statements = await runInDurableObject(stub, async (object: ApiKeyObject, state) => {
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
    const first = await run(); // loads the key, creates the tables and stores the key's state
    const admitted = await run();
    for (let i = 0; i < 8; i++) await run();
    const refused = await run();
    vi.setSystemTime(T0 + 1_000);
    const refusedSecondLater = await run();
    vi.setSystemTime(T0 + 60_000);
    const nextMinute = await run(); // the minute is counted in the state row, like the one before
    vi.setSystemTime(T0 + 26 * 3_600_000);
    const dayLater = await run(); // the finished hour's usage becomes a row
    vi.setSystemTime(T0 + 32 * 86_400_000);
    const monthLater = await run(); // again, and the first hour is a day past the 30-day window: a fold (3 statements and a read)
    const next = await run();
    return { first, admitted, refused, refusedSecondLater, nextMinute, dayLater, monthLater, next };
  });
  expect(statements.admitted).toEqual([true, 1]);
  expect(statements.refused).toEqual([false, 0]);
  expect(statements.refusedSecondLater).toEqual([false, 1]);
  expect(statements.nextMinute).toEqual([true, 1]);
  expect(statements.first).toEqual([true, 1 + 1 + 1]); // the tables and the key's state, once
  expect(statements.dayLater).toEqual([true, 1 + 1]);
  expect(statements.monthLater).toEqual([true, 1 + 1 + 4]);
  expect(statements.next).toEqual([true, 1]);
});
