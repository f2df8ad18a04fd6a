/**
 * A load run from the orchestrator's side: the job handed to bench/load/round-robin.ts in a process of
 * its own, and the CPU the worker's runtime and wrangler's proxy spent on it, per request.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Bench } from "../harness/bench.ts";
import { runLoad, settle, type Worker, workerCpu } from "../harness/processes.ts";
import { SMALL_PATH } from "../harness/start.ts";
import type { LoadJob, LoadResult } from "./round-robin.ts";

/** One load's result with the CPU each process spent on it. */
export interface Measured extends LoadResult {
  /** CPU of the workerd that runs the worker, per request (ms): the worker's own cost, whatever the load generator costs. */
  workerCpuMs: number;
  /** The same for wrangler's proxy workerd (≈ 0 when the load goes to the runtime directly). */
  proxyCpuMs: number;
  /** The load generator's CPU per request (ms). */
  loadCpuMs: number;
}

/** Runs `job` against the worker's own socket; its job file is `load-<name>.json` in the state folder. */
export async function measuredLoad(bench: Bench, worker: Worker, job: Omit<LoadJob, "url">, name: string): Promise<Measured> {
  const file = join(bench.state, `load-${name}.json`);
  writeFileSync(file, JSON.stringify({ ...job, url: worker.directUrl }));
  const seconds = job.amount ? 60 : job.duration;
  const before = workerCpu(worker);
  const result = await runLoad<LoadResult>(file, (seconds + 30) * 1000);
  const after = workerCpu(worker);
  if (result.errors > 0 || result.timeouts > 0) bench.step(`  ${name}: ${result.errors} errors, ${result.timeouts} timeouts`);
  const perRequest = (ms: number) => (result.requests ? ms / result.requests : NaN);
  return {
    ...result,
    workerCpuMs: perRequest((after.runtime - before.runtime) * 1000),
    proxyCpuMs: perRequest((after.proxy - before.proxy) * 1000),
    loadCpuMs: perRequest(result.cpuMs),
  };
}

/**
 * Every key once (the small response), then quiet until the worker is idle. workerd evicts a Durable
 * Object after about 10 s without requests and a key's first request after that rebuilds its object:
 * right before a load this makes it measure warm keys (as a steady stream of traffic would keep them),
 * not whichever objects the previous worker's turn let go cold, and the background work the warm-up
 * set off (such as last_used_at marks) finishes before the load instead of landing in it.
 */
export async function warmKeys(bench: Bench, worker: Worker, keys: string[], connections: number, label: string): Promise<void> {
  await measuredLoad(bench, worker, { path: SMALL_PATH, connections, duration: 0, amount: keys.length, keys }, `warm-keys-${label}`);
  if (!(await settle(worker))) bench.step(`${worker.name} was still busy 5 s after its keys were used: the load starts anyway`);
}
