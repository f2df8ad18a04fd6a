import { getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";

/**
 * D1 refuses a bound value over 2,000,000 bytes. The rows of a table travel as JSON parameters of at
 * most this many UTF-8 bytes each, several statements when needed (half the limit: a margin, and still
 * at most a few statements for the largest ingestion).
 */
const MAX_JSON_PARAMETER_BYTES = 1_000_000;

const utf8 = new TextEncoder();

/** The items as JSON arrays of at most MAX_JSON_PARAMETER_BYTES UTF-8 bytes each, in order. */
function jsonChunks(items: readonly unknown[], maxBytes = MAX_JSON_PARAMETER_BYTES): string[] {
  const chunks: string[] = [];
  let parts: string[] = [];
  let bytes = 2; // the brackets
  for (const item of items) {
    const json = JSON.stringify(item);
    const size = utf8.encode(json).byteLength + 1; // and its comma
    if (parts.length > 0 && bytes + size > maxBytes) {
      chunks.push(`[${parts.join(",")}]`);
      parts = [];
      bytes = 2;
    }
    parts.push(json);
    bytes += size;
  }
  if (parts.length > 0) chunks.push(`[${parts.join(",")}]`);
  return chunks;
}

/**
 * Statements inserting any number of rows: the rows travel as JSON parameters (one per statement, so
 * far under D1's 100 bound parameters) that `json_each` turns back into rows, split by size (above).
 * Column names come from the schema. On a conflict with `target`: nothing, every column replaced (`update: true`), or
 * the given SET clause (`update: "…"`, reading `excluded`).
 */
export function insertRows(
  d1: D1Database,
  {
    table,
    rows,
    conflict,
  }: { table: SQLiteTable; rows: readonly Record<string, unknown>[]; conflict?: { target: readonly string[]; update: boolean | string } },
): D1PreparedStatement[] {
  const columns = Object.entries(getTableColumns(table))
    .filter(([key]) => key in rows[0]!)
    .map(([key, column]) => ({ key, name: column.name }));
  const names = columns.map((c) => `"${c.name}"`).join(", ");
  const values = columns.map((c) => `value ->> '${c.name}'`).join(", ");
  let text = `INSERT INTO "${getTableName(table)}" (${names}) SELECT ${values} FROM json_each(?) WHERE true`;
  if (conflict) {
    const updates = columns.filter((c) => !conflict.target.includes(c.name)).map((c) => `"${c.name}" = excluded."${c.name}"`);
    const set = typeof conflict.update === "string" ? conflict.update : updates.join(", ");
    const action = conflict.update ? `UPDATE SET ${set}` : "NOTHING";
    text += ` ON CONFLICT (${conflict.target.map((c) => `"${c}"`).join(", ")}) DO ${action}`;
  }
  const statement = d1.prepare(text);
  const objects = rows.map((row) => Object.fromEntries(columns.map(({ key, name }) => [name, row[key] ?? null])));
  return jsonChunks(objects).map((json) => statement.bind(json));
}
