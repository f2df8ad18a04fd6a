/**
 * What a stored row takes, measured on the state the costs bench leaves (bench/modes/costs.ts), once its worker has
 * stopped: the local D1 database, the objects' SQLite and the R2 bucket's objects as miniflare keeps them on disk,
 * read with the sqlite3 command-line shell. docs/costs.json's `storage`, which the scale model (scripts/simulate.ts)
 * sizes its databases with.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { type StoredBytes, D1_TABLES as TABLES } from "../../scripts/simulate.ts";

/** A table smaller than this many pages is priced at the larger tables' fill (its own is mostly one page's slack). */
const FILLED_PAGES = 100;

const sqlite = <Row>(file: string, query: string): Row[] => {
  const out = execFileSync("sqlite3", ["-json", file, query], { encoding: "utf8", maxBuffer: 64 << 20 }).trim();
  return out ? (JSON.parse(out) as Row[]) : [];
};

/** Every SQLite file under `dir` (miniflare's persisted D1, objects and R2 metadata), none of SQLite's side files. */
function sqliteFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".sqlite"))
    .map((entry) => join(entry.parentPath, entry.name));
}

const pagesOf = (file: string) =>
  sqlite<{ bytes: number }>(file, "SELECT page_count * page_size AS bytes FROM pragma_page_count, pragma_page_size")[0]!.bytes;

/**
 * Per table: its pages and its indexes' (dbstat, grouped by the table they belong to) ÷ its rows, in whichever D1
 * database holds it (the main one, the alert windows' own: ALERTS_DB). A large table's bytes are its pages; a small
 * one's (a few hundred keys, the bench's events) its used bytes scaled by the fill the large tables show, since one
 * page of slack over a dozen rows is not what a row takes at scale.
 */
function d1BytesPerRow(dir: string): { bytes_per_row: Record<string, number>; rows: Record<string, number> } {
  const files = sqliteFiles(join(dir, "v3/d1")).sort((a, b) => pagesOf(b) - pagesOf(a));
  if (files.length === 0) throw new Error(`no D1 database under ${dir}`);
  // Each table in the largest database that has it: the main one, or the alert windows' own for theirs.
  const tablesOf = new Map(
    files.map((file) => [
      file,
      new Set(sqlite<{ name: string }>(file, "SELECT name FROM sqlite_schema WHERE type = 'table'").map(({ name }) => name)),
    ]),
  );
  const fileOf = new Map(TABLES.map((table) => [table, files.find((file) => tablesOf.get(file)!.has(table))]));
  const sizes = [...new Set(fileOf.values())].flatMap((file) =>
    !file
      ? []
      : sqlite<{ table: string; bytes: number; used: number; pages: number }>(
          file,
          'SELECT s.tbl_name AS "table", sum(d.pgsize) AS bytes, sum(d.pgsize - d.unused) AS used, count(*) AS pages ' +
            "FROM dbstat AS d JOIN sqlite_schema AS s ON s.name = d.name GROUP BY s.tbl_name",
        ).filter((size) => fileOf.get(size.table as (typeof TABLES)[number]) === file),
  );
  const rows = Object.fromEntries(
    TABLES.map((table) => {
      const file = fileOf.get(table);
      return [table, file ? sqlite<{ n: number }>(file, `SELECT count(*) AS n FROM "${table}"`)[0]!.n : 0];
    }),
  ) as Record<string, number>;
  const filled = sizes.filter((size) => size.pages >= FILLED_PAGES);
  const fill =
    filled.reduce((n, size) => n + size.bytes, 0) /
      Math.max(
        1,
        filled.reduce((n, size) => n + size.used, 0),
      ) || 1;
  const bytesPerRow = Object.fromEntries(
    TABLES.map((table) => {
      const size = sizes.find((one) => one.table === table);
      if (!size || rows[table] === 0) return [table, 0];
      const bytes = size.pages >= FILLED_PAGES ? size.bytes : size.used * fill;
      return [table, Math.round(bytes / rows[table]!)];
    }),
  );
  return { bytes_per_row: bytesPerRow, rows };
}

/** An API key's object: its SQLite database's pages (what an object's storage is billed on), averaged over the keys' objects. */
function objectBytesPerKey(dir: string): { bytes: number; objects: number } {
  const files = readdirSync(join(dir, "v3/do"), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name.endsWith("ApiKeyObject"))
    .flatMap((entry) => sqliteFiles(join(dir, "v3/do", entry.name)));
  if (files.length === 0) return { bytes: 0, objects: 0 };
  return { bytes: Math.round(files.reduce((n, file) => n + pagesOf(file), 0) / files.length), objects: files.length };
}

/** The full build's segments in R2 (each form and its index), ÷ the products it holds. */
function snapshotBytesPerProduct(dir: string, products: number): number {
  const builds = sqliteFiles(join(dir, "v3/r2")).flatMap((file) => {
    const tables = sqlite<{ name: string }>(file, "SELECT name FROM sqlite_schema WHERE name = '_mf_objects'");
    if (tables.length === 0) return [];
    return sqlite<{ build: string; bytes: number }>(
      file,
      "SELECT substr(key, 20, instr(substr(key, 20), '/') - 1) AS build, sum(size) AS bytes FROM _mf_objects " +
        "WHERE key LIKE 'catalogue/segments/%' GROUP BY build",
    );
  });
  const largest = Math.max(0, ...builds.map((build) => build.bytes));
  return Math.round(largest / products);
}

export function storedBytes(dir: string, products: number): StoredBytes {
  const d1 = d1BytesPerRow(dir);
  const objects = objectBytesPerKey(dir);
  return {
    d1_bytes_per_row: d1.bytes_per_row,
    d1_rows: d1.rows,
    object_bytes_per_key: objects.bytes,
    key_objects: objects.objects,
    snapshot_bytes_per_product: snapshotBytesPerProduct(dir, products),
  };
}
