/**
 * The catalogue snapshot at each of the run's sizes (bench/modes/catalogue.ts measures one size): the
 * last part of the full run, and alone as `npm run bench -- --catalogue [--quick] [--products-max]`
 * (`npm run bench:catalogue`), which writes bench/results/catalogue.md and catalogue.json.
 */
import type { Bench } from "../harness/bench.ts";
import type { Run, Settings } from "../harness/settings.ts";
import { freezeWorkers } from "../harness/start.ts";
import { machine, nowUtc } from "../report/run-info.ts";
import { CATALOGUE_NOTES, type CatalogueResult, catalogueReport, measureCatalogue, seedTimeoutMs } from "./catalogue.ts";

/** Each size's seed, plus as long again for its build, requests and changes. */
export const catalogueSeconds = (settings: Settings) =>
  settings.catalogueSizes.reduce((sum, size) => sum + (2 * seedTimeoutMs(size)) / 1000, 0);

/** One size after another, each on a worker of its own started from the real worker's frozen `config`. */
export async function catalogueBySize(bench: Bench, config: string, settings: Settings): Promise<CatalogueResult[]> {
  const vars = await bench.workerVars();
  const adminToken = await bench.token("bench-admin", "prices:write");
  const results: CatalogueResult[] = [];
  for (const size of settings.catalogueSizes) {
    results.push(
      await measureCatalogue(size, { work: bench.state, vars, adminToken, config, changes: settings.catalogueChanges, step: bench.step }),
    );
  }
  return results;
}

export async function catalogueMode(bench: Bench, { args, settings }: Run): Promise<string> {
  const { ours } = await freezeWorkers(bench, ["ours"]);
  const results = await catalogueBySize(bench, ours, settings);
  const text = `### Catalogue snapshot (\`npm run bench -- --catalogue${args.quick ? " --quick" : ""}${args["products-max"] ? " --products-max" : ""}\`), ${nowUtc()}\n\n${catalogueReport(results)}\n\n${CATALOGUE_NOTES}`;
  bench.writeResults({ "catalogue.md": `${text}\n`, "catalogue.json": `${JSON.stringify({ machine: machine(), results }, null, 2)}\n` });
  return text;
}
