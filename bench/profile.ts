/**
 * Where a worker's CPU goes: V8's sampling profiler in the worker's isolate (through wrangler's
 * inspector proxy, like the heap reading in processes.ts) while a load runs. Locally the Durable
 * Objects run in the same isolate as the worker, so one profile shows both the request path and
 * the key's object. Self time per function, grouped by name and source position.
 */
import { writeFileSync } from "node:fs";
import type { Worker } from "./processes.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

export interface HotFunction {
  name: string;
  /** Where it is: the bundle's file name and line, or the runtime's own code. */
  where: string;
  selfPercent: number;
}

/** Inspector calls over one socket, answered in order of their ids. */
async function inspector(worker: Worker) {
  const origin = `http://127.0.0.1:${worker.inspectorPort}`;
  // undici's WebSocket takes headers; the inspector proxy insists on an Origin.
  const socket = new WebSocket(`ws://127.0.0.1:${worker.inspectorPort}/ws`, { headers: { Origin: origin } } as unknown as string[]);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve());
    socket.addEventListener("error", () => reject(new Error(`inspector of ${worker.name} unreachable`)));
  });
  const pending = new Map<number, (result: unknown) => void>();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) pending.get(message.id)?.(message.result);
  });
  let nextId = 1;
  const send = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve) => {
      const id = nextId++;
      pending.set(id, resolve as (result: unknown) => void);
      socket.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => socket.close() };
}

/**
 * Samples the isolate every 100 µs while `during` runs; the `top` functions by self time. The whole
 * profile is written to `saveTo` (a .cpuprofile that Chrome DevTools opens, with inclusive times).
 */
export async function cpuProfile(worker: Worker, during: () => Promise<unknown>, saveTo: string, top = 15): Promise<HotFunction[]> {
  const session = await inspector(worker);
  try {
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 100 });
    await session.send("Profiler.start");
    await during();
    const { profile } = await session.send<{ profile: { nodes: ProfileNode[] } }>("Profiler.stop");
    writeFileSync(saveTo, JSON.stringify(profile));
    return hottest(profile.nodes, top);
  } finally {
    session.close();
  }
}

/** Idle time is left out: the percentages are of the time the isolate was running code. */
export function hottest(nodes: readonly ProfileNode[], top: number): HotFunction[] {
  const self = new Map<string, { name: string; where: string; hits: number }>();
  let busy = 0;
  for (const { callFrame, hitCount = 0 } of nodes) {
    if (hitCount === 0 || callFrame.functionName === "(idle)" || callFrame.functionName === "(program)") continue;
    const file = callFrame.url.split("/").pop() || "(runtime)";
    const where = callFrame.url ? `${file}:${callFrame.lineNumber + 1}` : "(runtime)";
    const name = callFrame.functionName || "(anonymous)";
    const key = `${name} ${where}`;
    const entry = self.get(key) ?? { name, where, hits: 0 };
    entry.hits += hitCount;
    self.set(key, entry);
    busy += hitCount;
  }
  return [...self.values()]
    .sort((a, b) => b.hits - a.hits)
    .slice(0, top)
    .map(({ name, where, hits }) => ({ name, where, selfPercent: busy === 0 ? 0 : (100 * hits) / busy }));
}
