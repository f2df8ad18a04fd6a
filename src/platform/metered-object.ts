import { DurableObject } from "cloudflare:workers";
import { AsyncLocalStorage } from "node:async_hooks";
import { type ObjectAnswer, WorkMeter } from "./metered.ts";

/**
 * A Durable Object that counts its own work for the invocation it does it for. Its storage is metered: every SQL
 * statement's `rowsWritten` as its cursor reports it, each key a KV `put` or `delete` names (a row of the hidden KV
 * table) and each `setAlarm` (stored, and billed, as a row); its other bindings and its calls to other objects count
 * through `this.meter`. An RPC method returns `this.reported(answer)`, which carries the work done for answers since
 * the last report, and the caller adds it to its own tally (WorkMeter.called). An alarm, and work it goes on with
 * after an answer, are invocations of their own (`invocation`): their work is logged with them, never carried by the
 * next answer. Calls interleave only across awaits, so an answer that awaits may carry another's work.
 */
export abstract class MeteredObject extends DurableObject<Env> {
  /** The work done for answers, until the next report takes it. */
  readonly #forAnswers = new WorkMeter();
  /** The meter of the alarm or after-answer invocation under way, through its awaits. */
  readonly #invocation = new AsyncLocalStorage<WorkMeter>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.ctx = meteredState(this.ctx, (rows) => {
      this.meter.doRowsWritten += rows;
    });
  }

  /** Where the work under way counts: its invocation's meter, or the next answer's. */
  protected get meter(): WorkMeter {
    return this.#invocation.getStore() ?? this.#forAnswers;
  }

  /** The answer, with the work done for answers since the last report. */
  protected reported<T extends object>(answer: T): T & ObjectAnswer {
    return { ...answer, work: this.#forAnswers.taken() };
  }

  /**
   * Work that is no answer's (an alarm; what the object goes on with after an answer, in waitUntil), run as an
   * invocation of its own: counted on its own meter and logged with it, as `kind`.
   */
  protected async invocation(kind: string, run: () => Promise<unknown>): Promise<void> {
    const meter = new WorkMeter();
    try {
      await this.#invocation.run(meter, run);
    } finally {
      meter.log(this.env, kind);
    }
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
