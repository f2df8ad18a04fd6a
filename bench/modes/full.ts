/**
 * `npm run bench [-- --quick] [--products-max] [--connections N] [--seconds S]`: the six workers of
 * bench/harness/workers.ts side by side on GET /products (two response sizes, rounds alternating the
 * order), a CPU profile of ours and floor-write, exactness, revocation lag, work per request, the webhook
 * latency, the 10,000-product catalogue and memory; then the catalogue snapshot at its sizes.
 * Writes bench/results/latest.md and latest.json, and a full run's report into docs/benchmark.md.
 */
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PLAN_LIMITS } from "../../src/rate-limit/plans.ts";
import type { Bench } from "../harness/bench.ts";
import { isolateHeap } from "../harness/inspector.ts";
import { type BenchKeys, makeKeys, REVOKE_ACCOUNT } from "../harness/keys.ts";
import { type Memory, ROOT, run, stopAll, type Worker, workerMemory } from "../harness/processes.ts";
import { cpuProfile } from "../harness/profile.ts";
import type { Run } from "../harness/settings.ts";
import { seedState } from "../harness/setup.ts";
import { dataProbe, freezeWorkers, SMALL_PATH, startReady } from "../harness/start.ts";
import { LOAD_ORDER, LOADED, UNLIMITED, type WorkerName } from "../harness/workers.ts";
import { type Measured, measuredLoad, warmKeys } from "../load/measured.ts";
import { type Results, report } from "../report/full.ts";
import { withResults } from "../report/results-doc.ts";
import { machine } from "../report/run-info.ts";
import { catalogueBySize, catalogueSeconds } from "./catalogue-sizes.ts";
import { type Exactness, exactness, fetchBytes, type Revocation, revocationLag, type WorkReport, workPerRequest } from "./probes.ts";
import { webhookLatency } from "./webhook-latency.ts";

const FREE_LIMIT = PLAN_LIMITS.free.per_minute;

export const fullBudgetSeconds = ({ settings }: Run) => settings.watchdogSeconds + catalogueSeconds(settings);

export async function fullMode(bench: Bench, { size, settings }: Run): Promise<string> {
  const { state, step } = bench;
  step(
    `${size} run: ${settings.loadKeys} Premium keys, ${settings.connections} connections, ${settings.loadSeconds} s per load × ${settings.rounds} round(s)`,
  );
  step(
    `bundling the ${LOADED.length} workers once; seeding 1,000 products + keys (worker state) and 10,000 products + keys (catalogue state)`,
  );
  const keys: BenchKeys = await makeKeys({ load: settings.loadKeys, exact: settings.exactKeys, revoke: settings.revocationTrials });
  const mainState = join(state, "d1");
  const catalogueState = join(state, "catalogue");
  const [frozen] = await Promise.all([
    freezeWorkers(bench, LOADED),
    seedState(mainState, settings.products, keys.sql),
    seedState(catalogueState, settings.catalogueProducts, keys.sql),
  ]);

  // Each worker gets its own copy of the one seeded state: identical data, no two processes on one SQLite file.
  const persist = { ours: mainState } as Record<WorkerName, string>;
  for (const name of LOADED.filter((n) => n !== "ours")) {
    persist[name] = join(state, `d1-${name}`);
    cpSync(mainState, persist[name], { recursive: true });
  }

  step(
    `starting ${LOADED.length + 1} workers with wrangler dev (${LOADED.length} loaded, plus the real worker on the 10,000-product catalogue)`,
  );
  // Every loaded worker runs as deployed (no X-Work-Counts); the second instance of ours counts work.
  // The peers need the same variables: they mount the product's request context, which checks them.
  // The webhook latency's receiver is http://127.0.0.1 (bench/modes/webhook-latency.ts).
  const vars = await bench.workerVars({ WEBHOOK_ALLOW_INSECURE_URLS: "true" });
  const { workers: started, viaProxy } = await startReady(
    bench,
    [
      ...LOADED.map((name) => ({ name, config: frozen[name], persistTo: persist[name], vars })),
      {
        name: "ours (10,000 products)",
        config: frozen.ours,
        persistTo: catalogueState,
        vars: { ...vars, EXPOSE_WORK_COUNTS: "true" },
        log: "catalogue",
      },
    ],
    dataProbe(keys.probe.key),
  );
  const workers = Object.fromEntries(started.map((w, i) => [LOADED[i] ?? "catalogue", w])) as Record<WorkerName | "catalogue", Worker>;
  if (viaProxy.length > 0) step(`could not find the runtime's own socket of ${viaProxy.join(", ")}: loading through wrangler's proxy`);
  step(`all ready: ${started.map((w) => `${w.name} ${w.directUrl}`).join(", ")}`);

  // On the instance with X-Work-Counts (its catalogue is bigger, which the counts do not depend on).
  step("work per request (ours, X-Work-Counts)");
  const work: WorkReport = await workPerRequest(
    workers.catalogue.directUrl,
    { seen: keys.seen.key, overLimit: keys.overLimit.key, overLimitPerMinute: FREE_LIMIT },
    settings.seenSamples,
  );

  const loadKeys = keys.load.map((k) => k.key);
  const load = (name: WorkerName | "catalogue", job: Parameters<typeof measuredLoad>[2], label: string) =>
    measuredLoad(bench, workers[name], job, label);
  const warm = (name: WorkerName, label: string) => warmKeys(bench, workers[name], loadKeys, settings.connections, label);
  const loads: Results["loads"] = { full: {}, small: {} } as Results["loads"];
  for (let round = 1; round <= settings.rounds; round++) {
    // Every other round in reverse, so that no worker always comes first; ours and floor-write stay neighbours (LOAD_ORDER).
    for (const name of round % 2 === 1 ? LOAD_ORDER : [...LOAD_ORDER].reverse()) {
      step(
        `round ${round}/${settings.rounds}: ${name}: GET /products and GET ${SMALL_PATH}, ${settings.loadSeconds} s each, every key once before each`,
      );
      if (round === 1)
        await load(
          name,
          { path: "/products", connections: settings.connections, duration: settings.warmupSeconds, keys: loadKeys },
          `warm-${name}`,
        );
      for (const [kind, path] of [
        ["full", "/products"],
        ["small", SMALL_PATH],
      ] as const) {
        await warm(name, `${kind}-${name}-${round}`);
        const result = await load(
          name,
          { path, connections: settings.connections, duration: settings.loadSeconds, keys: loadKeys },
          `${kind}-${name}-${round}`,
        );
        (loads[kind][name] ??= []).push(result);
      }
    }
  }

  step("CPU profile of the isolate: ours and floor-write, small response (every key once before each)");
  const profileLoad = (name: "ours" | "floor-write") => () =>
    load(name, { path: SMALL_PATH, connections: settings.connections, duration: settings.loadSeconds, keys: loadKeys }, `profile-${name}`);
  const profileFile = (name: string) => join(ROOT, "bench/results", `profile-${name}.cpuprofile`);
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  await warm("ours", "profile-ours");
  const oursProfile = await cpuProfile(workers.ours, profileLoad("ours"), profileFile("ours"));
  await warm("floor-write", "profile-floor-write");
  const profiles = {
    ours: oursProfile,
    "floor-write": await cpuProfile(workers["floor-write"], profileLoad("floor-write"), profileFile("floor-write")),
  };

  step(`exactness: ${3 * FREE_LIMIT} concurrent requests at each of ${keys.exact.length} fresh Free keys, per worker`);
  const exact = {} as Record<WorkerName, Exactness>;
  for (const name of LOADED) {
    if (UNLIMITED.includes(name)) continue;
    exact[name] = await exactness(
      workers[name].directUrl,
      keys.exact.map((k) => k.key),
      3 * FREE_LIMIT,
      FREE_LIMIT,
    );
  }

  step(`revocation lag: ${settings.revocationTrials} trial(s) on ours`);
  const jwt = await bench.token(REVOKE_ACCOUNT);
  const revocations: Revocation[] = [];
  for (const key of keys.revoke) revocations.push(await revocationLag(workers.ours.directUrl, key, jwt, { beforeMs: 400, afterMs: 600 }));

  step(
    `webhook latency: ${settings.webhookSamples} price changes, one at a time, from the ingestion's answer to the receiver's 2xx (ours)`,
  );
  const hookTokens = { admin: await bench.token("bench-admin", "prices:write"), account: await bench.token("bench-webhooks") };
  const hooks = await webhookLatency(workers.ours.directUrl, hookTokens, settings.webhookSamples);

  step(`catalogue: GET /products on ${settings.catalogueProducts.toLocaleString("en")} products`);
  const catalogueUrl = `${workers.catalogue.directUrl}/products`;
  const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
  // The worker's first request pokes the snapshot builder; until the first snapshot is built, 503.
  let first = await fetchBytes(catalogueUrl, bearer(keys.load[0]!.key));
  for (const until = Date.now() + 120_000; first.status === 503 && Date.now() < until; ) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    first = await fetchBytes(catalogueUrl, bearer(keys.load[0]!.key));
  }
  if (first.status !== 200 || !first.etag) throw new Error(`GET /products on the catalogue worker answered ${first.status}.`);
  const notModified = await fetchBytes(catalogueUrl, { ...bearer(keys.load[1]!.key), "If-None-Match": first.etag });
  // 100 keys, each used once first: the measurement is of the catalogue, not of waking key objects.
  const catalogueKeys = loadKeys.slice(0, 100);
  await load(
    "catalogue",
    { path: SMALL_PATH, connections: 4, duration: 0, amount: catalogueKeys.length, keys: catalogueKeys },
    "catalogue-warm",
  );
  const catalogueFull: Measured = await load(
    "catalogue",
    { path: "/products", connections: 1, duration: settings.catalogueSeconds, keys: catalogueKeys },
    "catalogue-full",
  );
  const catalogue304 = await load(
    "catalogue",
    {
      path: "/products",
      connections: 1,
      duration: settings.catalogueSeconds,
      keys: catalogueKeys,
      headers: { "If-None-Match": first.etag },
    },
    "catalogue-304",
  );

  const memory = {} as Record<WorkerName | "catalogue", Memory | undefined>;
  for (const [name, worker] of Object.entries(workers)) {
    const heap = await isolateHeap(worker);
    const rss = workerMemory(worker);
    memory[name as WorkerName | "catalogue"] = rss && {
      ...rss,
      heapUsedMb: heap?.usedMb,
      heapTotalMb: heap?.totalMb,
      buffersMb: heap?.buffersMb,
    };
  }

  // The loaded workers are done: the catalogue sizes run alone, each on a worker of its own.
  await stopAll();
  const catalogueSizes = await catalogueBySize(bench, frozen.ours, settings);

  const results: Results = {
    mode: size,
    settings,
    viaProxy,
    machine: machine(),
    loads,
    exact,
    revocations,
    work,
    catalogue: {
      products: settings.catalogueProducts,
      bytes: first.bytes,
      status304: notModified.status,
      bytes304: notModified.bytes,
      full: catalogueFull,
      notModified: catalogue304,
    },
    memory,
    profiles,
    webhooks: hooks,
    catalogueSizes,
    seconds: bench.seconds(),
  };
  const text = report(results);
  bench.writeResults({ "latest.md": `${text}\n`, "latest.json": `${JSON.stringify(results, null, 2)}\n` });
  // Only a full run's figures are worth publishing; a quick run is a smoke test.
  if (size === "full") {
    const docPath = join(ROOT, "docs/benchmark.md");
    writeFileSync(docPath, withResults(readFileSync(docPath, "utf8"), text));
    // Formatted as `npm run check` wants it (the report's tables are not padded), so a run leaves the check passing.
    await run(process.execPath, [join(ROOT, "node_modules/@biomejs/biome/bin/biome"), "format", "--write", docPath]);
    step("results written to docs/benchmark.md");
  }
  return text;
}
