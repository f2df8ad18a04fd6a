import { countingD1, type D1Work, type Database, database } from "./db.ts";

/**
 * Meters on the bindings an invocation reaches, so what it costs is counted by the code that pays it: X-Work-Counts,
 * the invocations' log lines, the catalogue builder's step report and the bench all read these.
 */

/** R2 operations by billing class: A is put, list and multipart; B is get and head; delete is free. */
export type R2Operation = "a" | "b" | "free";
const R2_CLASS: Record<string, R2Operation> = {
  get: "b",
  head: "b",
  put: "a",
  list: "a",
  createMultipartUpload: "a",
  resumeMultipartUpload: "a",
  delete: "free",
};

/** An R2 bucket that tells `count` the class and the method of each operation it starts. */
export function meteredBucket(bucket: R2Bucket, count: (operation: R2Operation, method: string) => void): R2Bucket {
  return new Proxy(bucket, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      const operation = R2_CLASS[property as string];
      if (!operation) return value.bind(target);
      return (...args: unknown[]) => {
        count(operation, property as string);
        return value.apply(target, args);
      };
    },
  });
}

/** The tally's fields, in X-Work-Counts' order (the contract's), each with its name there. */
const FIELDS = {
  d1: "d1",
  d1Statements: "d1-statements",
  d1RowsRead: "d1-rows-read",
  d1RowsWritten: "d1-rows-written",
  keyObjectCalls: "key-do",
  otherObjectCalls: "other-do",
  doRowsWritten: "do-rows-written",
  r2ClassA: "r2-a",
  r2ClassB: "r2-b",
  queueSent: "queue-sent",
} as const;

/**
 * Counted and logged, not in X-Work-Counts (the contract fixes its fields): D1's serial time, each statement at
 * max(1 ms, the duration D1 reports for it), and the statements whose result reports none (src/platform/db.ts D1Work);
 * of that time, the alert windows' own database's (ALERTS_DB: a database runs one statement at a time, so the scale
 * model needs each one's); KV reads, and KV writes, deletes and lists (Workers KV bills those alike): the OAuth
 * records of one-click connect.
 */
const LOGGED_ONLY = ["d1Ms", "alertsD1Ms", "d1Untimed", "kvReads", "kvWrites"] as const;

/**
 * What an invocation did: D1 round trips and statements (a batch's one by one) with the rows D1 says they read and
 * wrote and the time they took, calls to an API key's own object and to other objects (the other buckets, the
 * builder, hubs, shards, endpoints), the rows the objects reached wrote to their own storage, R2 operations by
 * billing class and queue messages sent.
 */
export type WorkCounts = Record<keyof typeof FIELDS | (typeof LOGGED_ONLY)[number], number>;

/** What a metered object's answer carries (src/platform/metered-object.ts): the work it did for the call. */
export interface ObjectAnswer {
  work: WorkCounts;
}

const HEADER_NAMES = Object.keys(FIELDS) as (keyof typeof FIELDS)[];
const FIELD_NAMES: (keyof WorkCounts)[] = [...HEADER_NAMES, ...LOGGED_ONLY];

/**
 * One invocation's tally (a request, a queue batch, a cron run, an object's alarm or its work after an answer): every
 * binding it reaches counts into it where the work happens, through the meter's own wrappers, and an object's answer
 * adds what the object did for the call. A request's tally stays open while its body streams and while its work
 * after the answer runs; it is final when the last of them ends (whenFinal), and logged then.
 */
export class WorkMeter implements WorkCounts {
  d1 = 0;
  d1Statements = 0;
  d1RowsRead = 0;
  d1RowsWritten = 0;
  keyObjectCalls = 0;
  otherObjectCalls = 0;
  doRowsWritten = 0;
  r2ClassA = 0;
  r2ClassB = 0;
  queueSent = 0;
  d1Ms = 0;
  alertsD1Ms = 0;
  d1Untimed = 0;
  kvReads = 0;
  kvWrites = 0;
  /** Pieces still under way that can add to the tally: a streaming body, work after the answer. */
  #open = 0;
  #whenFinal: (() => void) | undefined;

  add(other: WorkCounts): void {
    for (const name of FIELD_NAMES) this[name] += other[name] ?? 0;
  }

  countR2(operation: R2Operation): void {
    if (operation === "a") this.r2ClassA++;
    else if (operation === "b") this.r2ClassB++;
  }

  /** A call to an object, counted now; what the object reports with its answer is added when the answer comes. */
  called<T extends ObjectAnswer>(answer: PromiseLike<T>, object: "key" | "other" = "other"): Promise<T> {
    if (object === "key") this.keyObjectCalls++;
    else this.otherObjectCalls++;
    return Promise.resolve(answer).then((answered) => {
      this.add(answered.work);
      return answered;
    });
  }

  /** The counts as they stand. */
  counts(): WorkCounts {
    return Object.fromEntries(FIELD_NAMES.map((name) => [name, this[name]])) as WorkCounts;
  }

  /** The counts as they stand, the meter starting again from zero: what an object reports with an answer. */
  taken(): WorkCounts {
    const counts = this.counts();
    for (const name of FIELD_NAMES) this[name] = 0;
    return counts;
  }

  /** A drizzle client whose statements count here. */
  database(d1: D1Database): Database {
    return database(d1, this);
  }

  /**
   * A drizzle client for the alert windows' own database (ALERTS_DB), counted as any other, and its D1 time also in
   * alertsD1Ms.
   */
  alertsDatabase(d1: D1Database): Database {
    const meter = this;
    const apart = new Proxy<D1Work>(this, {
      set(target, property, value: number) {
        if (property === "d1Ms") meter.alertsD1Ms += value - target.d1Ms!;
        return Reflect.set(target, property, value);
      },
    });
    return database(d1, apart);
  }

  /** The D1 binding itself, counting here: for code that wraps it again (a build step's own report). */
  d1Binding(d1: D1Database): D1Database {
    return countingD1(d1, this);
  }

  bucket(bucket: R2Bucket): R2Bucket {
    return meteredBucket(bucket, (operation) => this.countR2(operation));
  }

  /** A KV namespace whose reads (get, getWithMetadata) and writes (put, delete, list) count here. */
  kv(namespace: KVNamespace): KVNamespace {
    return new Proxy(namespace, {
      get: (target, property) => {
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          if (property === "get" || property === "getWithMetadata") this.kvReads++;
          else this.kvWrites++;
          return value.apply(target, args);
        };
      },
    });
  }

  /** A queue producer that counts the messages it is asked to send. */
  queue<Body>(queue: Queue<Body>): Queue<Body> {
    return new Proxy(queue, {
      get: (target, property) => {
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        if (property === "send") this.queueSent++;
        if (property === "sendBatch")
          return (messages: readonly unknown[], ...rest: unknown[]) => {
            this.queueSent += messages.length;
            return value.call(target, messages, ...rest);
          };
        return value.bind(target);
      },
    });
  }

  /** Work after the answer (waitUntil): the tally stays open until it ends. */
  follow<T>(work: Promise<T>): Promise<T> {
    const release = this.#hold();
    return work.finally(release);
  }

  /**
   * A body that does work as it is read (the catalogue's lists read R2 as they stream): passed through as it is, the
   * tally held open until it is done, fails or the client goes away. A read pending when the client cancels ends as
   * done too, so the guard in #hold keeps the release to one.
   */
  carry(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
    const release = this.#hold();
    const reader = body.getReader();
    return new ReadableStream({
      async pull(controller) {
        let read: ReadableStreamReadResult<Uint8Array>;
        try {
          read = await reader.read();
        } catch (error) {
          release();
          throw error;
        }
        if (!read.done) return controller.enqueue(read.value);
        release();
        controller.close();
      },
      cancel(reason) {
        release();
        return reader.cancel(reason);
      },
    });
  }

  /** True when nothing under way can add to the tally. */
  get final(): boolean {
    return this.#open === 0;
  }

  /** Calls `ended` once, when the tally is final: at once if it is already. */
  whenFinal(ended: () => void): void {
    if (this.final) ended();
    else this.#whenFinal = ended;
  }

  /** X-Work-Counts: every field in the contract's order, then whether anything can still add to it. */
  header(): string {
    return [...HEADER_NAMES.map((name) => `${FIELDS[name]}=${this[name]}`), `final=${this.final ? 1 : 0}`].join("; ");
  }

  /**
   * The invocation's one log line with its final tally, when LOG_INVOCATION_WORK is on (read by the bench,
   * bench/modes/costs.ts): named by its request id, or by its kind when it has none.
   */
  log(env: { LOG_INVOCATION_WORK: string }, invocation: string, requestId?: string): void {
    if (env.LOG_INVOCATION_WORK !== "true") return;
    console.log(JSON.stringify({ level: "info", event: "invocation_work", invocation, request_id: requestId, ...this.counts() }));
  }

  #hold(): () => void {
    this.#open++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.#open > 0) return;
      const ended = this.#whenFinal;
      this.#whenFinal = undefined;
      ended?.();
    };
  }
}
