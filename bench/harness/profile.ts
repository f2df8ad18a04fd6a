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

/**
 * Samples the isolate every 100 µs while `during` runs; the `top` functions by self time. The whole
 * profile is written to `saveTo` (a .cpuprofile that Chrome DevTools opens, with inclusive times).
 */
export async function cpuProfile(worker: Worker, during: () => Promise<unknown>, saveTo: string, top = 15): Promise<HotFunction[]> {
  const session = await openInspector(worker);
  try {
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 100 });
    await session.send("Profiler.start");
    await during();
    const { profile } = await session.send<{ profile: { nodes: ProfileNode[] } }>("Profiler.stop", {}, 60_000);
    writeFileSync(saveTo, JSON.stringify(profile));
    return hottest(profile.nodes, top);
  } finally {
    session.close();
  }
}

type CallFrame = ProfileNode["callFrame"];

/**
 * The `top` call sites by weight (samples, bytes), each with its share of the total, and the total: sites are
 * grouped by function name and source position.
 */
function topSites(weighed: Iterable<{ callFrame: CallFrame; weight: number }>, top: number) {
  const sites = new Map<string, { name: string; where: string; weight: number }>();
  let total = 0;
  for (const { callFrame, weight } of weighed) {
    const file = callFrame.url.split("/").pop() || "(runtime)";
    const where = callFrame.url ? `${file}:${callFrame.lineNumber + 1}` : "(runtime)";
    const name = callFrame.functionName || "(anonymous)";
    const key = `${name} ${where}`;
    const entry = sites.get(key) ?? { name, where, weight: 0 };
    entry.weight += weight;
    sites.set(key, entry);
    total += weight;
  }
  const ranked = [...sites.values()].sort((a, b) => b.weight - a.weight).slice(0, top);
  return { total, sites: ranked.map(({ name, where, weight }) => ({ name, where, percent: total === 0 ? 0 : (100 * weight) / total })) };
}

/** Idle time is left out: the percentages are of the time the isolate was running code. */
function hottest(nodes: readonly ProfileNode[], top: number): HotFunction[] {
  const busy = nodes.filter(
    ({ callFrame, hitCount = 0 }) => hitCount > 0 && callFrame.functionName !== "(idle)" && callFrame.functionName !== "(program)",
  );
  const { sites } = topSites(
    busy.map(({ callFrame, hitCount = 0 }) => ({ callFrame, weight: hitCount })),
    top,
  );
  return sites.map(({ name, where, percent }) => ({ name, where, selfPercent: percent }));
}

export interface AllocationSite {
  name: string;
  /** As HotFunction's. */
  where: string;
  /** Its share of the bytes sampled. */
  bytesPercent: number;
}

interface AllocationNode {
  callFrame: CallFrame;
  selfSize: number;
  children: AllocationNode[];
}

/**
 * What a worker allocates while `during` runs: V8's sampling heap profiler in the worker's isolate (a sample
 * every 16 KiB allocated, on average), so the garbage collector's share of a profile can be traced to the code
 * that made its work. The `top` allocation sites by bytes, as a share of all bytes sampled; the whole profile is
 * written to `saveTo` (a .heapprofile that Chrome DevTools opens).
 */
export async function allocationProfile(
  worker: Worker,
  during: () => Promise<unknown>,
  saveTo: string,
  top = 15,
): Promise<{ sampledBytes: number; sites: AllocationSite[] }> {
  const session = await openInspector(worker);
  try {
    await session.send("HeapProfiler.enable");
    await session.send("HeapProfiler.startSampling", {
      samplingInterval: 16_384,
      // Garbage included: what was allocated, not what is still alive when sampling stops.
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    await during();
    const { profile } = await session.send<{ profile: { head: AllocationNode } }>("HeapProfiler.stopSampling", {}, 60_000);
    writeFileSync(saveTo, JSON.stringify(profile));
    const allocated: { callFrame: CallFrame; weight: number }[] = [];
    const visit = ({ callFrame, selfSize, children }: AllocationNode) => {
      if (selfSize > 0) allocated.push({ callFrame, weight: selfSize });
      for (const child of children) visit(child);
    };
    visit(profile.head);
    const { total, sites } = topSites(allocated, top);
    return { sampledBytes: total, sites: sites.map(({ name, where, percent }) => ({ name, where, bytesPercent: percent })) };
  } finally {
    session.close();
  }
}
