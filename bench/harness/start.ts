/**
 * Bundling, seeding and starting the bench's workers: every mode that runs a worker goes through here,
 * so each is bundled once, logs into the state's logs/ folder, and is loaded on the runtime's own
 * socket when it can be found (bench/harness/processes.ts findDirectUrl).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Bench } from "./bench.ts";
import { findDirectUrl, freeze, startWorker, type Worker, waitReady, wrangler } from "./processes.ts";
import { CONFIGS, type WorkerName } from "./workers.ts";

/**
 * A query that matches nothing: the whole admission path, the handler, and a tiny body. A brand filter
 * asks D1's brand index (one batch of three reads: the catalogue's reset version, the products changed
 * since the snapshot, the brand's ids) and reads no segment. The readiness probes ask for it too.
 */
export const SMALL_PATH = "/products?brand=bench-none";

/** How a mode knows its workers are up: `ready` answers at all (below 500); `direct` tells the runtime's own socket from its other ports. */
export interface Probe {
  ready: (url: string) => Promise<Response>;
  /** Absent: the mode talks to wrangler's proxy, as it always has. */
  direct?: (url: string) => Promise<boolean>;
}

/** The data route with a live key: the runtime's own socket answers it with the catalogue's ETag; its inspector and debug ports do not. */
export const dataProbe = (key: string): Probe => {
  const get = (url: string, timeoutMs: number) =>
    fetch(`${url}${SMALL_PATH}`, { headers: { Authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(timeoutMs) });
  return {
    ready: (url) => get(url, 20_000),
    direct: async (url) => {
      const res = await get(url, 5_000);
      await res.arrayBuffer();
      return res.status === 200 && (res.headers.get("ETag") ?? "").startsWith('"cat-');
    },
  };
};

/** The OpenAPI document, for a worker with no keys seeded. */
export const openApiProbe = (options: { direct: boolean }): Probe => ({
  ready: (url) => fetch(`${url}/openapi.json`, { signal: AbortSignal.timeout(20_000) }),
  ...(options.direct
    ? { direct: async (url: string) => (await fetch(`${url}/openapi.json`, { signal: AbortSignal.timeout(5_000) })).ok }
    : {}),
});

/** Each named worker bundled once into the state's build/ folder, one after another; their frozen configurations. */
export async function freezeWorkers<N extends WorkerName>(bench: Bench, names: readonly N[]): Promise<Record<N, string>> {
  const frozen = {} as Record<N, string>;
  for (const name of names) frozen[name] = await freeze(CONFIGS[name], join(bench.state, "build", name));
  return frozen;
}

export interface WorkerSpec {
  name: string;
  config: string;
  persistTo: string;
  vars: Record<string, string>;
  /** The log's name in logs/ (`name` unless told). */
  log?: string;
}

/**
 * Starts every worker, waits until all answer `probe.ready`, then finds each one's own socket when
 * `probe.direct` is given. The workers in `specs` order, and the names of those loaded through wrangler's proxy.
 */
export async function startReady(
  bench: Bench,
  specs: readonly WorkerSpec[],
  probe: Probe,
): Promise<{ workers: Worker[]; viaProxy: string[] }> {
  mkdirSync(join(bench.state, "logs"), { recursive: true });
  const workers: Worker[] = [];
  for (const spec of specs) {
    workers.push(
      await startWorker({
        name: spec.name,
        config: spec.config,
        persistTo: spec.persistTo,
        vars: spec.vars,
        log: join(bench.state, "logs", `${spec.log ?? spec.name}.log`),
      }),
    );
  }
  await Promise.all(workers.map((w) => waitReady(w, probe.ready, 120_000)));
  const viaProxy: string[] = [];
  if (probe.direct) {
    for (const worker of workers) if (!(await findDirectUrl(worker, probe.direct))) viaProxy.push(worker.name);
  }
  return { workers, viaProxy };
}

/**
 * The real worker alone on an empty, migrated D1 (no seeded catalogue or keys), ready; `direct`: loaded on the
 * runtime's own socket (its `directUrl`) rather than through wrangler's proxy.
 */
export async function startOursAlone(
  bench: Bench,
  { vars = {}, direct }: { vars?: Record<string, string>; direct: boolean },
): Promise<Worker> {
  const { ours } = await freezeWorkers(bench, ["ours"]);
  const d1 = join(bench.state, "d1");
  for (const binding of ["DB", "ALERTS_DB"]) await wrangler(["d1", "migrations", "apply", binding, "--local", "--persist-to", d1]);
  const { workers } = await startReady(
    bench,
    [{ name: "ours", config: ours, persistTo: d1, vars: await bench.workerVars(vars) }],
    openApiProbe({ direct }),
  );
  return workers[0]!;
}
