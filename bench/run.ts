/**
 * `npm run bench [-- --quick] [--products-max] [--connections N] [--seconds S] [--keep-state]`: the full
 *   run (bench/modes/full.ts): six workers side by side, then the catalogue snapshot at its sizes.
 * `npm run bench -- --soak [--seconds S]`: the soak instead (bench/modes/soak.ts; 600 s unless told).
 * `npm run bench -- --webhooks`: only the webhook latency, the stream's latency and MCP's cost beside REST
 *   (bench/modes/webhooks.ts), on the real worker alone.
 * `npm run bench -- --stream`: only the event stream fed by push: 100 and 500 open streams, an idle minute and a
 *   steady rate of changes (bench/modes/stream.ts).
 * `npm run bench -- --secret-scanning [--quick]`: only a secret-scanning report's time to the key's first
 *   refusal and what a report of 1,000 and 10,000 tokens costs (bench/modes/secret-scanning.ts).
 * `npm run bench -- --search [--quick] [--products-max]`: only search_products' text, through its index and
 *   by the scan it replaced, at 10,000 and 100,000 products (bench/modes/search.ts; `--products-max` adds 1,000,000).
 * `npm run bench -- --hot-path [--rounds N] [--seconds S] [--profile]`: only ours against floor-write on the
 *   small response (bench/modes/hot-path.ts).
 * `npm run bench -- --catalogue [--quick] [--products-max]` (`npm run bench:catalogue`): only the catalogue
 *   snapshot at its sizes (bench/modes/catalogue-sizes.ts), written to bench/results/catalogue.md.
 * `npm run bench -- --costs [--sizes 10000,100000] [--stream-seconds 60]`: what each operation the model prices
 *   costs, from the worker's own meter, written to docs/costs.json (bench/modes/costs.ts).
 * `npm run bench -- --exports [--quick] [--products-max]`: only a catalogue export (Parquet) at the catalogue's sizes: wall
 *   time, steps, CPU per step, R2 operations, bytes, the largest step against the limits (bench/modes/exports.ts),
 *   written to bench/results/exports.md.
 *
 * This file picks the mode, prints its report and stops everything it started: at the end, on error,
 * on a signal, and by a watchdog sized to the mode.
 */
import { type Bench, openBench } from "./harness/bench.ts";
import { stopAllNow } from "./harness/processes.ts";
import { type Run, readSettings } from "./harness/settings.ts";
import { catalogueMode, catalogueSeconds } from "./modes/catalogue-sizes.ts";
import { costsBudgetSeconds, costsMode } from "./modes/costs.ts";
import { exportsMode, exportsSeconds } from "./modes/exports.ts";
import { fullBudgetSeconds, fullMode } from "./modes/full.ts";
import { hotPathBudgetSeconds, hotPathMode } from "./modes/hot-path.ts";
import { searchMode } from "./modes/search.ts";
import { secretScanningMode } from "./modes/secret-scanning.ts";
import { soakBudgetSeconds, soakMode } from "./modes/soak.ts";
import { streamMode } from "./modes/stream.ts";
import { webhooksMode } from "./modes/webhooks.ts";

interface Mode {
  /** Part of the state folder's name. */
  name: string;
  /** How long the whole run may take before the watchdog stops it. */
  budgetSeconds: (run: Run) => number;
  /** The report to print; `failed` sets the exit code. */
  measure: (bench: Bench, run: Run) => Promise<string | { text: string; failed: boolean }>;
}

const run = readSettings();
const { args } = run;
/** The mode a flag selects, the first that is set in this order; none set: the full bench. */
const MODES: readonly [flag: keyof typeof args | undefined, Mode][] = [
  ["soak", { name: "soak", budgetSeconds: ({ soakSeconds }) => soakBudgetSeconds(soakSeconds), measure: soakMode }],
  ["webhooks", { name: "hooks", budgetSeconds: fullBudgetSeconds, measure: webhooksMode }],
  ["stream", { name: "stream", budgetSeconds: fullBudgetSeconds, measure: streamMode }],
  ["search", { name: "search", budgetSeconds: fullBudgetSeconds, measure: searchMode }],
  ["secret-scanning", { name: "secret-scanning", budgetSeconds: fullBudgetSeconds, measure: secretScanningMode }],
  ["hot-path", { name: "hot-path", budgetSeconds: hotPathBudgetSeconds, measure: hotPathMode }],
  ["catalogue", { name: "catalogue", budgetSeconds: ({ settings }) => catalogueSeconds(settings), measure: catalogueMode }],
  ["costs", { name: "costs", budgetSeconds: costsBudgetSeconds, measure: costsMode }],
  ["exports", { name: "exports", budgetSeconds: exportsSeconds, measure: exportsMode }],
  [undefined, { name: "bench", budgetSeconds: fullBudgetSeconds, measure: fullMode }],
];
const [, mode] = MODES.find(([flag]) => flag === undefined || args[flag])!;

const bench = openBench(mode.name, { keepState: args["keep-state"] });
/** Why the run is being stopped from outside (a signal, the watchdog), if it is. */
let stopping: string | undefined;
function stopFromOutside(reason: string, code: number) {
  if (stopping) return;
  stopping = reason;
  console.error(`\n${reason}: stopping everything.`);
  void bench.cleanUp().finally(() => process.exit(code));
}
process.on("exit", stopAllNow);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => stopFromOutside(signal, 130));
const budget = mode.budgetSeconds(run);
setTimeout(() => stopFromOutside(`The bench ran past its ${budget} s limit`, 1), budget * 1000).unref();

try {
  const outcome = await mode.measure(bench, run);
  const { text, failed } = typeof outcome === "string" ? { text: outcome, failed: false } : outcome;
  console.log(`\n${text}`);
  await bench.cleanUp();
  process.exit(failed ? 1 : 0);
} catch (error) {
  // Stopped from outside: stopFromOutside() reports, cleans up and exits.
  if (!stopping) {
    console.error(`\nThe bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await bench.cleanUp();
    process.exit(1);
  }
}
