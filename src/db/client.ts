import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import * as schema from "./schema.ts";

export type Database = DrizzleD1Database<typeof schema>;

const clients = new WeakMap<D1Database, Database>();

/**
 * A drizzle client for a D1 binding. Given a request's work tally, the client counts the queries it
 * sends into it (reported by X-Work-Counts); without one, one shared client per binding.
 */
export function database(d1: D1Database, work?: { d1: number }): Database {
  if (work) return drizzle(d1, { schema, logger: { logQuery: () => void work.d1++ } });
  let db = clients.get(d1);
  if (!db) {
    db = drizzle(d1, { schema });
    clients.set(d1, db);
  }
  return db;
}
