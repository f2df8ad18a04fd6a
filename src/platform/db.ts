import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
// No relational `db.query` API is used, so no schema is passed: drizzle() then does no per-call
// extraction of table relations, which matters because a counting client is built per request.
/** `$client` is the (counting) D1 binding, for a batch of plain statements. */
export type Database = DrizzleD1Database & { $client: D1Database };

const clients = new WeakMap<D1Database, Database>();
const EXECUTING = new Set(["run", "all", "first", "raw"]);

/** A statement that counts its executions; `bind` hands back a counting statement too. */
function countingStatement(statement: D1PreparedStatement, work: { d1: number }): D1PreparedStatement {
  return new Proxy(statement, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (property === "bind") return (...args: unknown[]) => countingStatement(value.apply(target, args), work);
      if (EXECUTING.has(property as string)) work.d1++;
      return value.bind(target);
    },
  });
}

/** Counts round trips to D1: each executed statement, and each batch once. */
function countingD1(d1: D1Database, work: { d1: number }): D1Database {
  return new Proxy(d1, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (property === "prepare") return (query: string) => countingStatement(value.call(target, query), work);
      if (property === "batch" || property === "exec") work.d1++;
      return value.bind(target);
    },
  });
}

/**
 * A drizzle client for a D1 binding. Given a request's work tally, it counts the round trips it
 * makes to D1 into it (reported by X-Work-Counts); without one, one shared client per binding.
 */
export function database(d1: D1Database, work?: { d1: number }): Database {
  if (work) return drizzle(countingD1(d1, work));
  let db = clients.get(d1);
  if (!db) {
    db = drizzle(d1);
    clients.set(d1, db);
  }
  return db;
}
