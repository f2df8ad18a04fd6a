/**
 * Where a worker's CPU goes: V8's sampling profiler in the worker's isolate (bench/harness/inspector.ts)
 * while a load runs. Locally the Durable Objects run in the same isolate as the worker, so one
 * profile shows both the request path and the key's object. Self time per function, grouped by
 * name and source position.
 */
import { writeFileSync } from "node:fs";
import { openInspector } from "./inspector.ts";
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

interface Profile {
  nodes: ProfileNode[];
  /** The node of each sample, and the µs since the sample before it. */
  samples: number[];
  timeDeltas: number[];
}

/** V8's sampling profile of the isolate, one sample every 100 µs, while `during` runs. */
async function recordProfile(worker: Worker, during: () => Promise<unknown>): Promise<Profile> {
  const session = await openInspector(worker);
  try {
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 100 });
    await session.send("Profiler.start");
    await during();
    return (await session.send<{ profile: Profile }>("Profiler.stop", {}, 60_000)).profile;
  } finally {
    session.close();
  }
}

/**
 * Samples the isolate while `during` runs; the `top` functions by self time. The whole profile is
 * written to `saveTo` (a .cpuprofile that Chrome DevTools opens, with inclusive times).
 */
export async function cpuProfile(worker: Worker, during: () => Promise<unknown>, saveTo: string, top = 15): Promise<HotFunction[]> {
  const profile = await recordProfile(worker, during);
  writeFileSync(saveTo, JSON.stringify(profile));
  return hottest(profile.nodes, top);
}

/**
 * The isolate's own busy time (ms) while `during` runs: the time its samples stand for, but for the
 * idle ones. Unlike the runtime process's CPU (bench/harness/processes.ts runtimeCpuMs) it leaves out
 * the local D1 and R2, which run outside the isolate as they do on Cloudflare; V8's own work
 * ("(program)", the collector) counts. What Cloudflare's CPU limit measures, within the sampling's grain.
 */
export async function isolateBusyMs(worker: Worker, during: () => Promise<unknown>): Promise<number> {
  const { nodes, samples, timeDeltas } = await recordProfile(worker, during);
  const idle = new Set(nodes.filter((node) => node.callFrame.functionName === "(idle)").map((node) => node.id));
  let busyUs = 0;
  samples.forEach((node, i) => {
    if (!idle.has(node)) busyUs += timeDeltas[i] ?? 0;
  });
  return busyUs / 1000;
}

/** Idle time is left out: the percentages are of the time the isolate was running code. */
function hottest(nodes: readonly ProfileNode[], top: number): HotFunction[] {
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
