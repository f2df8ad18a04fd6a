import { env } from "cloudflare:workers";
import { vi } from "vitest";

export interface Statement {
  sql: string;
  params: unknown[];
}

/** `prepare`, recording each statement it makes and the parameters bound to it into `seen`. */
function recordingPrepare(seen: Statement[]): (sql: string) => D1PreparedStatement {
  const prepare = env.DB.prepare.bind(env.DB);
  return (sql) => {
    const statement: Statement = { sql, params: [] };
    seen.push(statement);
    const prepared = prepare(sql);
    return new Proxy(prepared, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property !== "bind" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
        return (...params: unknown[]) => {
          statement.params = params;
          return value.apply(target, params);
        };
      },
    });
  };
}

/**
 * The D1 statements `run` makes (the worker runs in the test's isolate and uses this same binding),
 * with their parameters, so a test can EXPLAIN and re-run each one. Everything in the isolate is
 * counted, background work included (a queue consumer, an object's alarm). `run` sees the statements so far.
 */
export async function statementsOf(run: (seen: readonly Statement[]) => Promise<unknown>): Promise<Statement[]> {
  const seen: Statement[] = [];
  const prepare = recordingPrepare(seen); // before the spy: it calls the binding's own prepare
  const spy = vi.spyOn(env.DB, "prepare").mockImplementation(prepare);
  try {
    await run(seen);
  } finally {
    spy.mockRestore();
  }
  return seen;
}

/** The D1 binding for one piece of code, recording into `seen` only the statements made through it. */
export function recordingD1(seen: Statement[]): D1Database {
  const prepare = recordingPrepare(seen);
  return new Proxy(env.DB, {
    get(target, property) {
      if (property === "prepare") return prepare;
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

export interface Cost {
  sql: string;
  plan: string[];
  rowsRead: number;
  rowsReturned: number;
  /** The UTF-8 bytes of the rows it returns, as JSON: what D1 sends the worker. */
  bytesReturned: number;
}

const utf8 = new TextEncoder();

/** Each read statement's query plan, and the rows D1 reads (`meta.rows_read`) against the rows (and bytes) it returns. */
export async function costOf(statements: readonly Statement[]): Promise<Cost[]> {
  const reads = statements.filter((s) => /^\s*select/i.test(s.sql));
  return Promise.all(
    reads.map(async ({ sql, params }) => {
      const plan = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .bind(...params)
        .all<{ detail: string }>();
      const result = await env.DB.prepare(sql)
        .bind(...params)
        .all();
      return {
        sql,
        plan: plan.results.map((row) => row.detail),
        rowsRead: result.meta.rows_read,
        rowsReturned: result.results.length,
        bytesReturned: utf8.encode(JSON.stringify(result.results)).byteLength,
      };
    }),
  );
}
