import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
// No relational `db.query` API is used, so no schema is passed: drizzle() then does no per-call
// extraction of table relations, which matters because a counting client is built per request.
/** `$client` is the (counting) D1 binding, for a batch of plain statements. */
export type Database = DrizzleD1Database & { $client: D1Database };

const clients = new WeakMap<D1Database, Database>();
const EXECUTING = new Set(["run", "all", "first", "raw"]);

/**
 * Round trips to D1; `d1Statements`, when the tally has it, counts each statement (a batch's one by one),
 * as D1's per-invocation query limit does; `d1RowsRead` and `d1RowsWritten`, the rows D1 says it read and wrote
 * (what D1 bills, and what shows a statement scanning a table it should seek in), from the results that carry
 * them (`all`, `run`, batches). `first` and `raw` carry none: a counting statement runs `first` as `all`, and a
 * write's `raw` (drizzle's `returning`, one table's columns) as `all` too, so every row written is counted; a
 * select's `raw` (drizzle's selects, whose joined columns may share a name) keeps its rows read uncounted.
 */
export interface D1Work {
  d1: number;
  d1Statements?: number;
  d1RowsRead?: number;
  d1RowsWritten?: number;
  /**
   * D1's serial time (ms): each statement at max(D1_STATEMENT_FLOOR_MS, the duration D1 reports in its result's
   * `meta.duration`); a statement whose result carries no meta (a select's `raw`) at the floor, and counted in
   * `d1Untimed`.
   */
  d1Ms?: number;
  d1Untimed?: number;
}

/** D1 bills and queues at least this long for a statement, however fast it ran (the scale model's floor). */
export const D1_STATEMENT_FLOOR_MS = 1;

const timed = (work: D1Work, meta: Partial<D1Result["meta"]> | undefined) => {
  if (work.d1Ms === undefined) return;
  const duration = typeof meta?.duration === "number" ? meta.duration : undefined;
  work.d1Ms += Math.max(D1_STATEMENT_FLOOR_MS, duration ?? 0);
  if (duration === undefined && work.d1Untimed !== undefined) work.d1Untimed++;
};

/** A statement whose result carries no meta (a select's `raw`): counted at the floor, as untimed. */
const untimed = (work: D1Work) => timed(work, undefined);

const ROWS_READ = new Set(["run", "all"]);

function countRowsRead<T>(result: Promise<T>, work: D1Work): Promise<T> {
  if (work.d1RowsRead === undefined && work.d1RowsWritten === undefined && work.d1Ms === undefined) return result;
  return result.then((value) => {
    for (const one of Array.isArray(value) ? value : [value]) {
      const meta = (one as Partial<D1Result>).meta;
      if (work.d1RowsRead !== undefined) work.d1RowsRead += meta?.rows_read ?? 0;
      if (work.d1RowsWritten !== undefined) work.d1RowsWritten += meta?.rows_written ?? 0;
      timed(work, meta);
    }
    return value;
  });
}

const isWrite = (query: string) => !/^\s*(select|with\b[\s\S]*\)\s*select)/i.test(query);

/** A statement that counts its executions; `bind` hands back a counting statement too. */
function countingStatement(statement: D1PreparedStatement, query: string, work: D1Work): D1PreparedStatement {
  return new Proxy(statement, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (property === "bind") return (...args: unknown[]) => countingStatement(value.apply(target, args), query, work);
      if (EXECUTING.has(property as string)) {
        work.d1++;
        if (work.d1Statements !== undefined) work.d1Statements++;
      }
      if (ROWS_READ.has(property as string)) return (...args: unknown[]) => countRowsRead(value.apply(target, args), work);
      const counted = () => countRowsRead(target.all<Record<string, unknown>>(), work).then(({ results }) => results);
      if (property === "first") {
        return async (column?: string) => {
          const [row] = await counted();
          return row === undefined ? null : column === undefined ? row : row[column];
        };
      }
      if (property === "raw" && isWrite(query)) {
        return async (options?: { columnNames?: boolean }) => {
          const rows = await counted();
          const values = rows.map((row) => Object.values(row));
          return options?.columnNames ? [Object.keys(rows[0] ?? {}), ...values] : values;
        };
      }
      if (property === "raw")
        return (...args: unknown[]) => {
          untimed(work);
          return value.apply(target, args);
        };
      return value.bind(target);
    },
  });
}

/** Counts round trips to D1: each executed statement, and each batch once. */
export function countingD1(d1: D1Database, work: D1Work): D1Database {
  return new Proxy(d1, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (property === "prepare") return (query: string) => countingStatement(value.call(target, query), query, work);
      if (property === "batch") {
        return (statements: D1PreparedStatement[]) => {
          work.d1++;
          if (work.d1Statements !== undefined) work.d1Statements += statements.length;
          return countRowsRead(value.call(target, statements), work);
        };
      }
      if (property === "exec") work.d1++;
      return value.bind(target);
    },
  });
}

/**
 * A drizzle client for a D1 binding. Given a request's work tally, it counts the round trips it
 * makes to D1 into it (reported by X-Work-Counts); without one, one shared client per binding.
 */
export function database(d1: D1Database, work?: D1Work): Database {
  if (work) return drizzle(countingD1(d1, work));
  let db = clients.get(d1);
  if (!db) {
    db = drizzle(d1);
    clients.set(d1, db);
  }
  return db;
}
