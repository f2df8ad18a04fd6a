/**
 * The worker's isolate through wrangler's inspector proxy (Chrome DevTools protocol): its heap, with
 * or without a forced collection first. Locally the Durable Objects run in the worker's isolate, so
 * their memory (the CatalogueBuilder's, the key objects') is in every reading.
 */
import type { Worker } from "./processes.ts";

export interface InspectorSession {
  /** One call; rejects when it is not answered within `timeoutMs`. */
  send<T>(method: string, params?: object, timeoutMs?: number): Promise<T>;
  /** Events the isolate sends (e.g. heap snapshot chunks). */
  on(method: string, listener: (params: unknown) => void): void;
  close(): void;
}

/** A session on the worker's isolate: calls answered by id, events by method. */
export async function openInspector(worker: Worker): Promise<InspectorSession> {
  // undici's WebSocket takes headers; the inspector proxy insists on an Origin.
  const init = { headers: { Origin: `http://127.0.0.1:${worker.inspectorPort}` } } as unknown as string[];
  const socket = new WebSocket(`ws://127.0.0.1:${worker.inspectorPort}/ws`, init);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve());
    socket.addEventListener("error", () => reject(new Error(`inspector of ${worker.name} unreachable`)));
  });
  const pending = new Map<number, (message: { result?: unknown; error?: { message: string } }) => void>();
  const listeners = new Map<string, (params: unknown) => void>();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as {
      id?: number;
      method?: string;
      params?: unknown;
      result?: unknown;
      error?: { message: string };
    };
    if (message.id !== undefined) pending.get(message.id)?.(message);
    else if (message.method) listeners.get(message.method)?.(message.params);
  });
  let nextId = 1;
  return {
    send: <T>(method: string, params: object = {}, timeoutMs = 10_000) =>
      new Promise<T>((resolve, reject) => {
        const id = nextId++;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${method} unanswered after ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, (message) => {
          clearTimeout(timer);
          pending.delete(id);
          if (message.error) reject(new Error(`${method}: ${message.error.message}`));
          else resolve(message.result as T);
        });
        socket.send(JSON.stringify({ id, method, params }));
      }),
    on: (method, listener) => listeners.set(method, listener),
    close: () => socket.close(),
  };
}

export interface Heap {
  usedMb: number;
  totalMb: number;
  /** ArrayBuffer backing stores (outside the JS heap). */
  buffersMb: number;
}

type HeapUsage = { usedSize: number; totalSize: number; backingStorageSize?: number };
const toHeap = (usage: HeapUsage): Heap => ({
  usedMb: usage.usedSize / 2 ** 20,
  totalMb: usage.totalSize / 2 ** 20,
  buffersMb: (usage.backingStorageSize ?? NaN) / 2 ** 20,
});

/** Runs `read` on a fresh session; undefined when the inspector does not answer. */
async function withSession<T>(worker: Worker, read: (session: InspectorSession) => Promise<T>): Promise<T | undefined> {
  let session: InspectorSession | undefined;
  try {
    session = await openInspector(worker);
    return await read(session);
  } catch {
    return undefined;
  } finally {
    session?.close();
  }
}

/**
 * V8's `Runtime.getHeapUsage`: the heap in use, which includes garbage not yet collected. How high
 * it climbs depends on when V8 chooses to collect, not only on what the code keeps.
 */
export const heapUsage = async (session: InspectorSession): Promise<Heap> => toHeap(await session.send<HeapUsage>("Runtime.getHeapUsage"));

/** heapUsage() on a session of its own. wrangler's inspector proxy keeps one session: opening one ends the one before. */
export const isolateHeap = (worker: Worker): Promise<Heap | undefined> => withSession(worker, heapUsage);

/**
 * workerd runs what V8 asks of the isolate from outside a request (`HeapProfiler.collectGarbage`,
 * a heap snapshot) only when the isolate next runs an event: an idle worker answers neither. A
 * request to a path the worker does not serve (a 404) is such an event, and costs next to nothing.
 */
async function nudge(worker: Worker): Promise<void> {
  const res = await fetch(`${worker.directUrl}/bench-inspector-nudge`, { signal: AbortSignal.timeout(30_000) });
  await res.arrayBuffer();
}

/** While `call` waits, nudges the isolate until it is answered. */
async function nudged<T>(worker: Worker, call: Promise<T>): Promise<T> {
  let answered = false;
  const result = call.finally(() => (answered = true));
  while (!answered) {
    await nudge(worker).catch(() => undefined);
    await Promise.race([result.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 250))]);
  }
  return result;
}

/**
 * The live heap: a full collection (`HeapProfiler.collectGarbage`), then `Runtime.getHeapUsage`.
 * What remains is what something still references, whatever V8's collection schedule.
 */
export async function liveHeapUsage(session: InspectorSession, worker: Worker): Promise<Heap> {
  await nudged(worker, session.send("HeapProfiler.collectGarbage", {}, 60_000));
  return heapUsage(session);
}
