/**
 * `npm run bench -- --exports [--quick] [--products-max]`: a catalogue export (docs/exports.md) at the catalogue's sizes
 * (10,000 and 100,000 products; `--products-max` adds 1,000,000, `--quick` is 2,000 alone), each on a freshly seeded
 * D1 and a worker of its own (the catalogue mode's harness, bench/modes/catalogue.ts) with LOG_INVOCATION_WORK on: the
 * first build publishes the snapshot, then an account's POST /exports (Parquet, our bucket) and its steps until it has
 * succeeded. Each step is its own invocation (ExportRunner's alarm, "export_step") and logs its final tally; its CPU is
 * the runtime's between one step's line and the next's, read every SAMPLE_MS. Writes bench/results/exports.md.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Bench } from "../harness/bench.ts";
import { makeKeys } from "../harness/keys.ts";
import { settle, type Worker, workerCpu } from "../harness/processes.ts";
import type { Run } from "../harness/settings.ts";
import { seedState } from "../harness/setup.ts";
import { freezeWorkers } from "../harness/start.ts";
import { nowUtc } from "../report/run-info.ts";
import { afterFirstBuild, onWorker, seedTimeoutMs } from "./catalogue.ts";
import { type LoggedWork, loggedSince } from "./costs.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How often the log and the runtime's CPU are read while the export runs. */
const SAMPLE_MS = 50;
const QUIET_MS = 2000;
/** The platform's per-invocation limits an alarm step runs under (Workers Paid): CPU by default, subrequests. */
const CPU_LIMIT_MS = 30_000;
const SUBREQUEST_LIMIT = 10_000;

interface Step {
  cpuMs: number;
  /** Calls out of the invocation: D1 round trips, R2 operations, object calls, queue sends. */
  subrequests: number;
  r2ClassA: number;
  r2ClassB: number;
  d1Statements: number;
}

const subrequestsOf = (w: LoggedWork) => w.d1 + w.r2ClassA + w.r2ClassB + w.keyObjectCalls + w.otherObjectCalls + w.queueSent;

interface ExportRow {
  id: string;
  status: string;
  rows: number;
  files: number;
  bytes: number;
  error: string | null;
}

/** POST /exports, then the steps' log lines as they come, each with the runtime's CPU since the one before, until the export ends. */
async function exportOnce(worker: Worker, log: string, token: string) {
  const auth = { Authorization: `Bearer ${token}` };
  await settle(worker, 5000);
  const from = readFileSync(log).byteLength;
  const started = performance.now();
  let cpuMark = workerCpu(worker).runtime;
  const res = await fetch(`${worker.directUrl}/exports`, {
    method: "POST",
    headers: { ...auth, "Content-Type": "application/json" },
    body: JSON.stringify({ kind: "catalogue", format: "parquet" }),
  });
  if (res.status !== 202) throw new Error(`POST /exports answered ${res.status}: ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  const steps: Step[] = [];
  let row: ExportRow | undefined;
  let lastCheck = 0;
  let wallMs = 0;
  let endedAt: number | undefined;
  // Until the row has ended and its last step's line has come (the line follows the row's update): quiet for QUIET_MS.
  while (endedAt === undefined || performance.now() - Math.max(endedAt, started + wallMs) < QUIET_MS) {
    await sleep(SAMPLE_MS);
    const lines = loggedSince(log, from).filter((line) => line.invocation === "export_step");
    if (lines.length > steps.length) {
      const cpu = workerCpu(worker).runtime;
      // Steps logged since the last sample share its CPU (rare at SAMPLE_MS: a step takes longer).
      const fresh = lines.slice(steps.length);
      for (const w of fresh) {
        steps.push({
          cpuMs: ((cpu - cpuMark) * 1000) / fresh.length,
          subrequests: subrequestsOf(w),
          r2ClassA: w.r2ClassA,
          r2ClassB: w.r2ClassB,
          d1Statements: w.d1Statements,
        });
      }
      cpuMark = cpu;
      wallMs = performance.now() - started;
    }
    // The row's status now and then: its own CPU (a request's few milliseconds) lands in the next step's share.
    if (endedAt === undefined && performance.now() - lastCheck > 2000) {
      lastCheck = performance.now();
      row = (await (await fetch(`${worker.directUrl}/exports/${id}`, { headers: auth })).json()) as ExportRow;
      if (row.status !== "running") endedAt = performance.now();
    }
  }
  if (row?.status !== "succeeded") throw new Error(`the export ended ${row?.status}: ${row?.error}`);
  return { wallMs, steps, rows: row.rows, files: row.files, bytes: row.bytes };
}

async function measureExport(bench: Bench, config: string, size: number) {
  const label = `export, ${size.toLocaleString("en")} products`;
  const keys = await makeKeys({ load: 1, exact: 0, revoke: 0 });
  const dir = join(bench.state, `exports-${size}`);
  bench.step(`${label}: seeding`);
  await seedState(dir, size, keys.sql, seedTimeoutMs(size));
  const context = {
    work: bench.state,
    vars: await bench.workerVars({ LOG_INVOCATION_WORK: "true" }),
    adminToken: "",
    config,
    changes: 0,
    step: bench.step,
  };
  const token = await bench.token("bench-exports");
  return onWorker(label, dir, context, async (worker, log) => {
    bench.step(`${label}: the first build publishes the snapshot`);
    const first = await afterFirstBuild(`${worker.directUrl}/products`, { Authorization: `Bearer ${keys.load[0]!.key}` });
    if (first.status !== 200) throw new Error(`GET /products answered ${first.status}`);
    bench.step(`${label}: POST /exports (catalogue, Parquet, our bucket) until it has succeeded`);
    const measured = await exportOnce(worker, log, token);
    bench.step(`${label}: ${measured.steps.length} steps in ${(measured.wallMs / 1000).toFixed(1)} s`);
    return { products: size, ...measured };
  });
}

type ExportResult = Awaited<ReturnType<typeof measureExport>>;

const sum = (steps: readonly Step[], field: keyof Step) => steps.reduce((total, step) => total + step[field], 0);
const most = (steps: readonly Step[], field: keyof Step) => Math.max(...steps.map((step) => step[field]));
const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(2)} MiB`;
const pct = (share: number) => `${(100 * share).toFixed(2)} %`;

function exportsReport(results: readonly ExportResult[]): string {
  const rows: [string, (r: ExportResult) => string][] = [
    ["wall time (POST /exports → the last step logged)", (r) => s(r.wallMs)],
    ["steps (alarms)", (r) => String(r.steps.length)],
    ["rows (offers) / files / bytes written (Parquet)", (r) => `${r.rows.toLocaleString("en")} / ${r.files} / ${mib(r.bytes)}`],
    ["runtime CPU: all steps / per step, mean", (r) => `${s(sum(r.steps, "cpuMs"))} / ${s(sum(r.steps, "cpuMs") / r.steps.length)}`],
    ["R2 operations, all steps: class A (writes) / class B (reads)", (r) => `${sum(r.steps, "r2ClassA")} / ${sum(r.steps, "r2ClassB")}`],
    ["D1 statements, all steps", (r) => String(sum(r.steps, "d1Statements"))],
    [
      `largest step's CPU (of the ${CPU_LIMIT_MS / 1000} s default limit)`,
      (r) => `${s(most(r.steps, "cpuMs"))} (${pct(most(r.steps, "cpuMs") / CPU_LIMIT_MS)})`,
    ],
    [
      `largest step's subrequests (of ${SUBREQUEST_LIMIT.toLocaleString("en")})`,
      (r) => `${most(r.steps, "subrequests")} (${pct(most(r.steps, "subrequests") / SUBREQUEST_LIMIT)})`,
    ],
  ];
  const head = `| | ${results.map((r) => `${r.products.toLocaleString("en")} products`).join(" | ")} |\n|---|${results.map(() => "---:").join("|")}|`;
  return [head, ...rows.map(([name, cell]) => `| ${name} | ${results.map(cell).join(" | ")} |`)].join("\n");
}

/** How the per-step figures move from the smallest size to the largest, in words from the data. */
function scaling(results: readonly ExportResult[]): string {
  if (results.length < 2) return "";
  const [a, b] = [results[0]!, results.at(-1)!];
  const ratio = (field: keyof Step) => most(b.steps, field) / most(a.steps, field);
  const flat = ratio("cpuMs") < 1.5 && ratio("subrequests") < 1.5;
  return (
    `From ${a.products.toLocaleString("en")} to ${b.products.toLocaleString("en")} products (${b.products / a.products} ×) the steps went ` +
    `from ${a.steps.length} to ${b.steps.length} (${(b.steps.length / a.steps.length).toFixed(1)} ×), the bytes ${(b.bytes / a.bytes).toFixed(1)} ×, ` +
    `while the largest step's CPU moved ${ratio("cpuMs").toFixed(2)} × and its subrequests ${ratio("subrequests").toFixed(2)} ×: ` +
    (flat
      ? "the number of steps grows with the products and the largest step does not (a step is bounded by the snapshot segments it reads), so a larger catalogue's largest step is measured here too."
      : "the largest step grew with the catalogue, which a step bounded by its segments should not: look at the steps' work.")
  );
}

const EXPORTS_NOTES =
  `Each size on a freshly seeded local D1 and its own \`wrangler dev\` worker with LOG_INVOCATION_WORK on; the first GET /products builds the snapshot, then one account's POST /exports (catalogue, Parquet, our R2 bucket). ` +
  `Each step is an alarm of the export's ExportRunner and logs its final tally (D1, R2 by class, object calls); subrequests count D1 round trips, R2 operations, object calls and queue sends. ` +
  `A step's CPU is the local runtime's (workerd: the isolate plus the local D1 and R2 it emulates, an upper bound of the worker's own) between its log line and the one before, read every ${SAMPLE_MS} ms in 10 ms ticks; GET /exports/:id every 2 s adds its few milliseconds to a step's share. ` +
  "The machine is shared (2 cores, other engineers' work running): wall time and CPU are upper bounds.";

/** The catalogue mode's sizes (bench/harness/settings.ts): 10,000 and 100,000, `--products-max` 1,000,000 too, `--quick` 2,000. */
const exportSizes = ({ settings }: Run) => settings.catalogueSizes;

/** The export at each size; writes bench/results/exports.md. */
export async function exportsMode(bench: Bench, run: Run): Promise<string> {
  const { args } = run;
  const { ours } = await freezeWorkers(bench, ["ours"]);
  const results: ExportResult[] = [];
  for (const products of exportSizes(run)) results.push(await measureExport(bench, ours, products));
  const flags = `${args.quick ? " --quick" : ""}${args["products-max"] ? " --products-max" : ""}`;
  const text = [
    `### Catalogue export (\`npm run bench -- --exports${flags}\`), ${nowUtc()}`,
    "",
    exportsReport(results),
    "",
    scaling(results),
    "",
    EXPORTS_NOTES,
  ].join("\n");
  bench.writeResults({ "exports.md": `${text}\n` });
  return text;
}

/** Each size's seed, plus as long again for its build and export. */
export const exportsSeconds = (run: Run) => exportSizes(run).reduce((total, products) => total + (2 * seedTimeoutMs(products)) / 1000, 0);
