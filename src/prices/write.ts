import { getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { bumpCatalogueVersion } from "../catalogue/service.ts";
import type { Database } from "../platform/db.ts";
import { outboxRows } from "../events/outbox.ts";
import { competitors, events, offers, priceHistory, products } from "../platform/tables.ts";
import type { Plan } from "./plan.ts";

/**
 * Step 3 of an ingestion: everything in ONE D1 batch (a transaction), guarded by the catalogue version.
 * Written with D1's own prepared statements: drizzle cannot put a raw `sql` statement in a batch.
 */

/**
 * Fails (a CHECK violation: catalogue_state allows only id 1) unless the version is still `version`,
 * which rolls the whole batch back. SQLite has no RAISE outside triggers; this has the same effect.
 */
const VERSION_GUARD = `INSERT INTO catalogue_state (id, version, updated_at)
  SELECT 0, 0, '' WHERE coalesce((SELECT version FROM catalogue_state WHERE id = 1), 0) <> ?`;

export function isVersionConflict(error: unknown): boolean {
  for (let e = error; e; e = e instanceof Error ? e.cause : undefined) {
    if (String(e).includes("catalogue_state_single_row")) return true;
  }
  return false;
}

/**
 * One statement for any number of rows: the rows travel as one JSON parameter (D1 allows 100 bound
 * parameters a statement) and `json_each` turns them back into rows. Column names come from the schema.
 */
function insertRows(d1: D1Database, table: SQLiteTable, rows: readonly Record<string, unknown>[], conflictTarget?: readonly string[]): D1PreparedStatement {
  const columns = Object.entries(getTableColumns(table))
    .filter(([key]) => key in rows[0]!)
    .map(([key, column]) => ({ key, name: column.name }));
  const json = JSON.stringify(rows.map((row) => Object.fromEntries(columns.map(({ key, name }) => [name, row[key] ?? null]))));
  const names = columns.map((c) => `"${c.name}"`).join(", ");
  const values = columns.map((c) => `value ->> '${c.name}'`).join(", ");
  let text = `INSERT INTO "${getTableName(table)}" (${names}) SELECT ${values} FROM json_each(?) WHERE true`;
  if (conflictTarget) {
    const updates = columns.filter((c) => !conflictTarget.includes(c.name)).map((c) => `"${c.name}" = excluded."${c.name}"`);
    text += ` ON CONFLICT (${conflictTarget.map((c) => `"${c}"`).join(", ")}) DO UPDATE SET ${updates.join(", ")}`;
  }
  return d1.prepare(text).bind(json);
}

/**
 * Marks the products whose view the plan changes with the new version, in the batch, so the snapshot
 * builder finds them even if its poke is lost: the written products and offers, and every product
 * with an offer from a written competitor (its name is in their offers).
 */
const MARK_CHANGED = "UPDATE products SET changed_version = ? WHERE id IN (SELECT value FROM json_each(?))";
// Two statements, not one with OR: an OR of two IN-subqueries makes SQLite scan every product.
const MARK_COMPETITORS_PRODUCTS = `UPDATE products SET changed_version = ?
  WHERE id IN (SELECT product_id FROM offers WHERE competitor_id IN (SELECT value FROM json_each(?)))`;

export async function writeBatch(db: Database, version: number, plan: Plan): Promise<void> {
  const d1 = (db as Database & { $client: D1Database }).$client; // the (counting) binding drizzle wraps
  const bump = bumpCatalogueVersion(db).toSQL();
  const statements = [d1.prepare(VERSION_GUARD).bind(version)];
  if (plan.competitors.length > 0) statements.push(insertRows(d1, competitors, plan.competitors, ["id"]));
  if (plan.products.length > 0) statements.push(insertRows(d1, products, plan.products, ["id"]));
  if (plan.offers.length > 0) statements.push(insertRows(d1, offers, plan.offers, ["product_id", "competitor_id"]));
  if (plan.history.length > 0) statements.push(insertRows(d1, priceHistory, plan.history));
  // The outbox: the events commit with the change or not at all (src/events/outbox.ts relays them).
  if (plan.events.length > 0) statements.push(insertRows(d1, events, outboxRows(plan.events, new Date().toISOString())));
  // The products the catalogue snapshot must re-serialise (src/catalogue/builder.ts reads these marks).
  const productIds = [...new Set([...plan.products.map((p) => p.id), ...plan.offers.map((o) => o.productId)])];
  statements.push(d1.prepare(MARK_CHANGED).bind(version + 1, JSON.stringify(productIds)));
  if (plan.competitors.length > 0) statements.push(d1.prepare(MARK_COMPETITORS_PRODUCTS).bind(version + 1, JSON.stringify(plan.competitors.map((c) => c.id))));
  statements.push(d1.prepare(bump.sql).bind(...bump.params));
  await d1.batch(statements);
}
