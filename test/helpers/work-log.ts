import { env } from "cloudflare:workers";
import { onTestFinished, vi } from "vitest";
import type { WorkCounts } from "../../src/platform/metered.ts";
import { WORK_COUNT_FIELDS, type WorkCountField } from "./http.ts";

/** One invocation's line (WorkMeter.log): its final tally, and its request id when it is a request. */
export type LoggedWork = WorkCounts & { invocation: string; request_id?: string };

/** X-Work-Counts' names of the logged fields. */
const LOGGED_AS: Record<WorkCountField, keyof WorkCounts> = {
  d1: "d1",
  "d1-statements": "d1Statements",
  "d1-rows-read": "d1RowsRead",
  "d1-rows-written": "d1RowsWritten",
  "key-do": "keyObjectCalls",
  "other-do": "otherObjectCalls",
  "do-rows-written": "doRowsWritten",
  "r2-a": "r2ClassA",
  "r2-b": "r2ClassB",
  "queue-sent": "queueSent",
};

/** A logged tally under X-Work-Counts' names. */
export const asWorkMeter = (line: WorkCounts): Record<WorkCountField, number> =>
  Object.fromEntries(WORK_COUNT_FIELDS.map((field) => [field, line[LOGGED_AS[field]]])) as Record<WorkCountField, number>;

export interface InvocationLog {
  /** Every invocation line logged since the log was turned on, in order. */
  lines: LoggedWork[];
  /** A request's final tally: its body read to its end (unless read already), then its line, found by X-Request-Id. */
  finalTally(res: Response): Promise<Record<WorkCountField, number>>;
}

let current: InvocationLog | undefined;

/**
 * Turns LOG_INVOCATION_WORK on for the rest of the test (the worker shares this isolate and its env) and keeps every
 * invocation's line instead of printing it. Off again when the test ends, so no invocation of a later moment logs
 * (a line an alarm logs after a file's last message stalls the runner: test/helpers/setup.ts).
 */
export function invocationLog(): InvocationLog {
  if (current) return current;
  const lines: LoggedWork[] = [];
  const settings = env as { LOG_INVOCATION_WORK: string };
  const was = settings.LOG_INVOCATION_WORK;
  settings.LOG_INVOCATION_WORK = "true";
  const print = console.log.bind(console);
  const spy = vi.spyOn(console, "log").mockImplementation((text?: unknown, ...rest: unknown[]) => {
    const line = typeof text === "string" && text.startsWith('{"level":"info","event":"invocation_work"') ? JSON.parse(text) : undefined;
    if (line) lines.push(line as LoggedWork);
    else print(text, ...rest);
  });
  const log: InvocationLog = {
    lines,
    async finalTally(res) {
      if (!res.bodyUsed) await res.arrayBuffer();
      const id = res.headers.get("X-Request-Id");
      const line = await vi.waitFor(
        () => {
          const found = lines.find((logged) => logged.request_id === id);
          if (!found) throw new Error(`no invocation line for request ${id}`);
          return found;
        },
        { timeout: 15_000, interval: 10 },
      );
      return asWorkMeter(line);
    },
  };
  current = log;
  onTestFinished(() => {
    spy.mockRestore();
    settings.LOG_INVOCATION_WORK = was;
    current = undefined;
  });
  return log;
}
