/**
 * `npm run bench -- --hot-path [--rounds N] [--seconds S] [--profile]`: the narrowest check of the hot
 * path, ours against floor-write on the small response only (the limiter's cost, not the body's), N
 * rounds (3 unless told) alternating which goes first, every key once and the worker idle before each
 * load, as in the full run. A couple of minutes. `--profile` then takes one more load of each under
 * V8's sampling profiler (as the full run does) and lists where each isolate's CPU went, and one more under its
 * sampling heap profiler: what each allocates per request, and where (the garbage collector's work).
 * Writes bench/results/hot-path.md and hot-path.json.
 */
import { cpSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Bench } from "../harness/bench.ts";
import { makeKeys } from "../harness/keys.ts";
import { ROOT, type Worker } from "../harness/processes.ts";
import { allocationProfile, cpuProfile } from "../harness/profile.ts";
import type { Run } from "../harness/settings.ts";
import { seedState } from "../harness/setup.ts";
import { dataProbe, freezeWorkers, SMALL_PATH, startReady } from "../harness/start.ts";
import { type Measured, measuredLoad, warmKeys } from "../load/measured.ts";
import { machine, nowUtc } from "../report/run-info.ts";

const NAMES = ["ours", "floor-write"] as const;
type Name = (typeof NAMES)[number];

export const hotPathBudgetSeconds = ({ args, settings }: Run) =>
  180 + (settings.rounds + (args.profile ? 2 : 0)) * 2 * (settings.loadSeconds + 30);

export async function hotPathMode(bench: Bench, { args, settings }: Run): Promise<string> {
  const { state, step } = bench;
  step(
    `hot path: ${NAMES.join(" and ")}, GET ${SMALL_PATH}, ${settings.loadKeys} Premium keys, ${settings.connections} connections, ${settings.loadSeconds} s × ${settings.rounds} round(s)`,
  );
  const keys = await makeKeys({ load: settings.loadKeys, exact: 0, revoke: 0 });
  const seeded = join(state, "d1");
  const [frozen] = await Promise.all([freezeWorkers(bench, NAMES), seedState(seeded, settings.products, keys.sql)]);
  cpSync(seeded, join(state, "d1-floor-write"), { recursive: true });
  const vars = await bench.workerVars();
  const {
    workers: [ours, floorWrite],
    viaProxy,
  } = await startReady(
    bench,
    NAMES.map((name) => ({ name, config: frozen[name], persistTo: name === "ours" ? seeded : join(state, "d1-floor-write"), vars })),
    dataProbe(keys.probe.key),
  );
  for (const name of viaProxy) step(`could not find the runtime's own socket of ${name}: loading through wrangler's proxy`);
  const workers = { ours: ours!, "floor-write": floorWrite! };
  const loadKeys = keys.load.map((k) => k.key);
  const measure = (name: Name, label: string) =>
    measuredLoad(
      bench,
      workers[name],
      { path: SMALL_PATH, connections: settings.connections, duration: settings.loadSeconds, keys: loadKeys },
      label,
    );
  const rounds: Record<Name, Measured[]> = { ours: [], "floor-write": [] };
  for (let round = 1; round <= settings.rounds; round++) {
    for (const name of round % 2 === 1 ? NAMES : [...NAMES].reverse()) {
      await warmKeys(bench, workers[name], loadKeys, settings.connections, `${name}-${round}`);
      const result = await measure(name, `small-${name}-${round}`);
      step(
        `round ${round}: ${name} ${result.rps.toFixed(0)} req/s, ${result.workerCpuMs.toFixed(2)} ms worker CPU/request, ${result.non2xx} non-2xx, ${result.errors} errors`,
      );
      rounds[name].push(result);
    }
  }
  const profiled: string[] = [];
  const allocated: string[] = [];
  if (args.profile) {
    mkdirSync(join(ROOT, "bench/results"), { recursive: true });
    const saved = (file: string) => join(ROOT, "bench/results", file);
    /** One more load of `name`, every key used once first, while `profile` watches it; and its requests. */
    const watched = async <T>(name: Name, label: string, profile: (worker: Worker, during: () => Promise<unknown>) => Promise<T>) => {
      await warmKeys(bench, workers[name], loadKeys, settings.connections, `${name}-${label}`);
      let requests = 0;
      const found = await profile(workers[name], async () => (requests = (await measure(name, `${label}-${name}`)).requests));
      return { found, requests };
    };
    const table = (title: string, unit: string, rows: { name: string; where: string; percent: number }[]) => [
      "",
      `| ${title} | where | ${unit} |`,
      "|---|---|---:|",
      ...rows.map((f) => `| ${f.name} | ${f.where} | ${f.percent.toFixed(1)} |`),
    ];
    for (const name of NAMES) {
      const { found, requests } = await watched(name, "profile", (worker, during) =>
        cpuProfile(worker, during, saved(`hot-path-profile-${name}.cpuprofile`), 25),
      );
      profiled.push(
        "",
        `${name}: ${requests} requests profiled.`,
        ...table(
          `${name}: function`,
          "self %",
          found.map((f) => ({ ...f, percent: f.selfPercent })),
        ),
      );
    }
    for (const name of NAMES) {
      const { found, requests } = await watched(name, "allocations", (worker, during) =>
        allocationProfile(worker, during, saved(`hot-path-allocations-${name}.heapprofile`), 20),
      );
      const perRequest = (found.sampledBytes / requests / 1024).toFixed(1);
      allocated.push(
        "",
        `${name}: ${perRequest} KiB sampled per request (${requests} requests).`,
        ...table(
          `${name}: allocated in`,
          "% of bytes",
          found.sites.map((site) => ({ ...site, percent: site.bytesPercent })),
        ),
      );
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const lines = [
    `### Hot path (\`npm run bench -- --hot-path\`), ${nowUtc()}`,
    "",
    `GET ${SMALL_PATH}, ${settings.loadKeys} Premium keys round robin, ${settings.connections} connections, ${settings.loadSeconds} s per load; every key once and the worker idle before each load.`,
    "",
    "| round | ours req/s | floor-write req/s | ours ÷ floor-write | ours CPU ms/request | floor-write CPU ms/request | ours − floor-write, CPU ms |",
    "|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (let i = 0; i < settings.rounds; i++) {
    const [ours, floor] = [rounds.ours[i]!, rounds["floor-write"][i]!];
    lines.push(
      `| ${i + 1} | ${ours.rps.toFixed(0)} | ${floor.rps.toFixed(0)} | ${(ours.rps / floor.rps).toFixed(2)} × | ${ours.workerCpuMs.toFixed(2)} | ${floor.workerCpuMs.toFixed(2)} | ${(ours.workerCpuMs - floor.workerCpuMs).toFixed(2)} |`,
    );
  }
  const [oursRps, floorRps] = [median(rounds.ours.map((r) => r.rps)), median(rounds["floor-write"].map((r) => r.rps))];
  const cpu = median(rounds.ours.map((r) => r.workerCpuMs)) - median(rounds["floor-write"].map((r) => r.workerCpuMs));
  lines.push(
    "",
    `Medians: ours ${oursRps.toFixed(0)}, floor-write ${floorRps.toFixed(0)} req/s: **${(oursRps / floorRps).toFixed(2)} × floor-write** (aim ≥ 1.0 ×); worker CPU ${cpu >= 0 ? "+" : "−"}${Math.abs(cpu).toFixed(2)} ms/request.`,
    ...(profiled.length > 0 ? ["", "Where the CPU goes (self time, % of the isolate's busy time, one more load each):", ...profiled] : []),
    ...(allocated.length > 0 ? ["", "What it allocates (V8's sampling heap profiler, one more load each):", ...allocated] : []),
  );
  const text = lines.join("\n");
  bench.writeResults({
    "hot-path.md": `${text}\n`,
    "hot-path.json": `${JSON.stringify({ machine: machine(), settings, rounds }, null, 2)}\n`,
  });
  return text;
}
