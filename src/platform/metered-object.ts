import { DurableObject } from "cloudflare:workers";
import type { ObjectWrites } from "./metered.ts";

/**
 * A Durable Object that counts the rows its own storage writes, so each answer can carry what it wrote
 * (X-Work-Counts' do-rows-written): every SQL statement's `rowsWritten` as its cursor reports it, each key a KV
 * `put` or `delete` names (a row of the hidden KV table) and each `setAlarm` (stored, and billed, as a row).
 * Subclasses use `this.ctx.storage` as usual; it is the metered one. An RPC method returns `this.reported(answer)`,
 * which adds the rows written since the last report, and the caller adds them to its tally (reportedWork in
 * src/platform/metered.ts). Calls interleave only across awaits, so a call that awaits may carry another's rows;
 * an alarm's writes go with the next answer.
 */
export abstract class MeteredObject<E = Env> extends DurableObject<E> {
  #rowsWritten = 0;
  #objectCalls = 0;

  constructor(ctx: DurableObjectState, env: E) {
    super(ctx, env);
    this.ctx = meteredState(this.ctx, (rows) => {
      this.#rowsWritten += rows;
    });
  }

  /** The answer, with the storage rows written and the object calls made since the last report. */
  protected reported<T extends object>(answer: T): T & ObjectWrites {
    const work = { rowsWritten: this.#rowsWritten, objectCalls: this.#objectCalls };
    this.#rowsWritten = 0;
    this.#objectCalls = 0;
    return { ...answer, ...work };
  }

  /**
   * A call this object makes to another (metered) object: it counts in this object's next report, with the rows
   * that object reports (those of a call made after the answer, off its path, go with the answer after).
   */
  protected calledObject<T extends ObjectWrites>(answer: Promise<T>): Promise<T> {
    this.#objectCalls++;
    return answer.then((reported) => {
      this.#rowsWritten += reported.rowsWritten;
      this.#objectCalls += reported.objectCalls;
      return reported;
    });
  }
}

const keysNamed = (keys: unknown) => (Array.isArray(keys) ? keys.length : 1);

/** How many rows a KV-API write names: `put(key, value)` one, `put({ entries })` one per entry, `delete(keys)` one per key. */
const KV_ROWS: Record<string, (args: unknown[]) => number> = {
  put: ([keyOrEntries]) => (typeof keyOrEntries === "string" ? 1 : Object.keys(keyOrEntries as object).length),
  delete: ([keys]) => keysNamed(keys),
  setAlarm: () => 1,
};

function meteredState<State extends { storage: DurableObjectStorage }>(ctx: State, count: (rows: number) => void): State {
  const target = ctx.storage.sql;
  // Made once, not per access: every admission writes through it.
  const exec = (query: string, ...bindings: unknown[]) => {
    const cursor = target.exec(query, ...bindings);
    // A statement that returns no rows has run by the time exec returns, so its cursor's count is final here.
    count(cursor.rowsWritten);
    return cursor;
  };
  const sql = new Proxy(target, {
    get(_, property) {
      if (property === "exec") return exec;
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const storage = new Proxy(ctx.storage, {
    get(target, property) {
      if (property === "sql") return sql;
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      const rows = KV_ROWS[property as string];
      if (!rows) return value.bind(target);
      return (...args: unknown[]) => {
        count(rows(args));
        return value.apply(target, args);
      };
    },
  });
  return new Proxy(ctx, {
    get(target, property) {
      if (property === "storage") return storage;
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
