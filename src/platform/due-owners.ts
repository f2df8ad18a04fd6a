import { asc } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Database } from "./db.ts";

/**
 * Whose rows an archiver moves next (the history's products: src/catalogue/history-archive.ts; the delivery log's
 * webhooks: src/webhooks/delivery/delivery-archive.ts): the owners of the table's oldest `scan` rows, in the primary
 * key's order (commit order), that are due (`at` before `due`), at most `owners` of them, several rows of one owner
 * counted once. Due rows are picked here rather than in SQL: a WHERE on the time would walk the whole table by id
 * whenever none is due. A row written long after its time waits behind the rows committed before it.
 */
export async function dueOwners(
  db: Database,
  { table, id, owner, at }: { table: SQLiteTable; id: SQLiteColumn; owner: SQLiteColumn; at: SQLiteColumn },
  { due, scan, owners }: { due: string; scan: number; owners: number },
): Promise<string[]> {
  const oldest = await db.select({ owner, at }).from(table).orderBy(asc(id)).limit(scan);
  const dueOnes = oldest.filter((row) => (row.at as string) < due).map((row) => row.owner as string);
  return [...new Set(dueOnes)].slice(0, owners);
}
