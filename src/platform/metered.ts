/**
 * Meters on the bindings a request (or a task) reaches, so what it costs is counted by the code that pays it: the
 * request's work tally (X-Work-Counts), the catalogue builder's step report and the bench all read these.
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

/** A queue producer that counts the messages it is asked to send. */
export function meteredQueue<Body>(queue: Queue<Body>, work: { queueSent: number }): Queue<Body> {
  return new Proxy(queue, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (property === "send") work.queueSent++;
      if (property === "sendBatch")
        return (messages: readonly unknown[], ...rest: unknown[]) => {
          work.queueSent += messages.length;
          return value.call(target, messages, ...rest);
        };
      return value.bind(target);
    },
  });
}

/**
 * What a request cost, reported by X-Work-Counts when EXPOSE_WORK_COUNTS is on: D1 round trips and statements
 * (a batch's one by one) with the rows D1 says they read and wrote, object calls, R2 operations by billing class
 * and queue messages sent. One scheme for every meter's tally: `<what ran>Work` and its zero `no<what ran>Work()`
 * (a catalogue build's is BuildWork); D1Work (src/platform/db.ts) is the part of either that the D1 client counts.
 */
export interface RequestWork {
  d1: number;
  d1Statements: number;
  d1RowsRead: number;
  d1RowsWritten: number;
  /** Calls to an API key's own object. */
  keyObjectCalls: number;
  /** Calls to the objects of the other buckets (account, admin subject, client IP) and to the catalogue builder. */
  otherObjectCalls: number;
  /** Rows the objects it reached wrote to their own storage, as each reported with its answer (MeteredObject). */
  doRowsWritten: number;
  r2ClassA: number;
  r2ClassB: number;
  queueSent: number;
}

export const noRequestWork = (): RequestWork => ({
  d1: 0,
  d1Statements: 0,
  d1RowsRead: 0,
  d1RowsWritten: 0,
  keyObjectCalls: 0,
  otherObjectCalls: 0,
  doRowsWritten: 0,
  r2ClassA: 0,
  r2ClassB: 0,
  queueSent: 0,
});

/**
 * What an object's answer reports (src/platform/metered-object.ts): the rows its own storage wrote and the calls it
 * made to other objects.
 */
export interface ObjectWrites {
  rowsWritten: number;
  objectCalls: number;
}

/** The part of a tally that calls to objects count into. */
export type ObjectCallWork = Pick<RequestWork, "otherObjectCalls" | "doRowsWritten">;

/** Adds what an object's answer reports to the tally, and gives the answer back. */
export function withObjectWrites<T extends ObjectWrites>(work: ObjectCallWork, answer: T): T {
  work.doRowsWritten += answer.rowsWritten;
  work.otherObjectCalls += answer.objectCalls;
  return answer;
}

/** Counts each R2 operation into the tally by its billing class (deletes are free). */
export const countR2Into =
  (work: Pick<RequestWork, "r2ClassA" | "r2ClassB">) =>
  (operation: R2Operation): void => {
    if (operation === "a") work.r2ClassA++;
    else if (operation === "b") work.r2ClassB++;
  };

/**
 * A background invocation's work (a cron run, a queue batch, an object's alarm), which has no response to carry
 * X-Work-Counts: one log line per invocation when LOG_INVOCATION_WORK is on, read by the bench (bench/modes/costs.ts).
 */
export function logInvocationWork(env: { LOG_INVOCATION_WORK: string }, invocation: string, work: RequestWork): void {
  if (env.LOG_INVOCATION_WORK === "true") console.log(JSON.stringify({ level: "info", event: "invocation_work", invocation, ...work }));
}
