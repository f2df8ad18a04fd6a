/**
 * `npm run bench [-- --quick] [--products-max] [--connections N] [--seconds S] [--keep-state]`
 * `npm run bench -- --soak [--seconds S]`: the soak instead (bench/modes/soak.ts; 600 s unless told).
 * `npm run bench -- --webhooks`: only the webhook latency (bench/modes/webhook-latency.ts), the stream's latency and MCP's cost
 *   beside REST (bench/modes/stream-mcp.ts), on the real worker alone.
 * `npm run bench -- --secret-scanning`: only a secret-scanning report's time to the key's first refusal and what a
 *   report of 1,000 and 10,000 tokens costs (bench/modes/secret-scanning.ts), on the real worker alone.
 * `npm run bench -- --search [--quick] [--products-max]`: only search_products' text, through its index and by the scan
 *   it replaced, at 10,000 and 100,000 products (bench/modes/search.ts; `--products-max` adds 1,000,000).
 * `npm run bench -- --catalogue [--quick] [--products-max]` (`npm run bench:catalogue`): only the
 *   catalogue snapshot at its sizes (bench/modes/catalogue.ts), written to bench/results/catalogue.md.
 *
 * One run, under the same local workerd and the same seed, of GET /products on:
 *   bare               the product's handler with no authentication and no limiting (bench/peers/bare)
 *   ours               the real worker (wrangler.toml, src/)
 *   hono-rate-limiter  D1 key lookup + hono-rate-limiter's Durable Object store (bench/peers/hono-rate-limiter)
 *   native             D1 key lookup + the Workers Rate Limiting binding (bench/peers/native)
 *   floor-rpc          bare + one call per request to a no-op method of the key's SQLite-backed object (bench/peers/floor-rpc)
 *   floor-write        the same, the call writing one row: the design's physical floor (bench/peers/floor-write)
 * each under `wrangler dev` on 127.0.0.1 with its own copy of one seeded local D1, loaded by
 * autocannon in a separate process; then exactness, revocation lag, work per request, the
 * 10,000-product catalogue and memory; then the catalogue snapshot at 10,000 and 100,000 products
 * (`--products-max` adds 1,000,000; `--quick`: 2,000), each on a worker of its own (bench/modes/catalogue.ts).
 * Prints one report and writes it to bench/results/latest.md (a full run also to docs/benchmark.md).
 * Everything it starts is stopped at the end, on error, on a signal, and by a watchdog.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { availableParallelism, cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { mintToken } from "../scripts/mint-token.ts";
import { PLAN_LIMITS } from "../src/rate-limit/plans.ts";
import { isolateHeap } from "./harness/inspector.ts";
import { type BenchKeys, makeKeys, REVOKE_ACCOUNT } from "./harness/keys.ts";
import {
  findDirectUrl,
  freeze,
  type Memory,
  ROOT,
  runLoad,
  settle,
  startWorker,
  stopAll,
  stopAllNow,
  type Worker,
  waitReady,
  workerCpu,
  workerMemory,
  wrangler,
} from "./harness/processes.ts";
import { cpuProfile } from "./harness/profile.ts";
import { type Jwks, seedState, startJwks } from "./harness/setup.ts";
import { CONFIGS, LOADED, UNLIMITED, type WorkerName } from "./harness/workers.ts";
import type { LoadJob, LoadResult } from "./load/round-robin.ts";
import { CATALOGUE_NOTES, type CatalogueResult, catalogueReport, measureCatalogue, seedTimeoutMs } from "./modes/catalogue.ts";
import {
  type Exactness,
  exactness,
  fetchBytes,
  type Revocation,
  revocationLag,
  SMALL_PATH,
  type WorkReport,
  workPerRequest,
} from "./modes/probes.ts";
import { measureSearch, searchReport } from "./modes/search.ts";
import { measureSecretScanning, secretScanningReport, startReportSigner } from "./modes/secret-scanning.ts";
import { SOAK_KEYS, soak, soakBudgetSeconds, soakChart, soakReport } from "./modes/soak.ts";
import { streamAndMcp, streamAndMcpReport } from "./modes/stream-mcp.ts";
import { webhookLatency, webhookLatencyReport } from "./modes/webhook-latency.ts";
import { type Measured, type Results, report } from "./report/full.ts";
import { withResults } from "./report/results-doc.ts";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    soak: { type: "boolean", default: false },
    webhooks: { type: "boolean", default: false },
    catalogue: { type: "boolean", default: false },
    "hot-path": { type: "boolean", default: false },
    profile: { type: "boolean", default: false },
    "secret-scanning": { type: "boolean", default: false },
    search: { type: "boolean", default: false },
    rounds: { type: "string" },
    "products-max": { type: "boolean", default: false },
    connections: { type: "string" },
    seconds: { type: "string" },
    "keep-state": { type: "boolean", default: false },
  },
});

const MODES = {
  full: {
    webhookSamples: 30,
    loadKeys: 1000,
    connections: 16,
    warmupSeconds: 3,
    loadSeconds: 5,
    rounds: 3,
    revocationTrials: 3,
    seenSamples: 200,
    catalogueSeconds: 5,
    catalogueSizes: [10_000, 100_000],
    catalogueChanges: 3,
    watchdogSeconds: 900,
  },
  quick: {
    webhookSamples: 8,
    loadKeys: 200,
    connections: 16,
    warmupSeconds: 1,
    loadSeconds: 2,
    rounds: 1,
    revocationTrials: 1,
    seenSamples: 40,
    catalogueSeconds: 1.5,
    catalogueSizes: [2_000],
    catalogueChanges: 1,
    watchdogSeconds: 240,
  },
};
for (const name of ["connections", "seconds", "rounds"] as const) {
  const value = args[name];
  const most = args.soak && name === "seconds" ? 3600 : 600;
  if (value !== undefined && !(Number(value) > 0 && Number(value) <= most && (name === "seconds" || Number.isInteger(Number(value))))) {
    console.error(`--${name} must be a positive ${name === "seconds" ? "number" : "whole number"} (at most ${most}), e.g. --${name} 16.`);
    process.exit(2);
  }
}
const mode = args.quick ? "quick" : "full";
const SOAK_DEFAULT_SECONDS = 600;
const soakSeconds = Number(args.seconds ?? SOAK_DEFAULT_SECONDS);
const settings = {
  ...MODES[mode],
  ...(args.connections ? { connections: Number(args.connections) } : {}),
  ...(args.seconds ? { loadSeconds: Number(args.seconds) } : {}),
  ...(args.rounds ? { rounds: Number(args.rounds) } : {}),
  ...(args["products-max"] ? { catalogueSizes: [...MODES[mode].catalogueSizes, 1_000_000] } : {}),
  products: 1000,
  catalogueProducts: 10_000,
  exactKeys: 20,
};
const FREE_LIMIT = PLAN_LIMITS.free.per_minute;

const startedAt = Date.now();
const elapsed = () => `${((Date.now() - startedAt) / 1000).toFixed(1)} s`;
const step = (message: string) => console.error(`[bench ${elapsed()}] ${message}`);

// ---- Stopping by itself ----------------------------------------------------------------------------

let state: string | undefined;
let jwks: Server | undefined;
/** The secret-scanning mode's stand-in for GitHub's key list. */
let reportKeyList: Server | undefined;

/** What the real worker needs to start in the bench: the local IdP, and a fresh webhook secret key (harmless where unused). */
const workerVars = (idp: Jwks) => ({
  IDP_ISSUER: idp.issuer,
  IDP_AUDIENCE: "price-data-api",
  IDP_JWKS_URL: idp.jwksUrl,
  WEBHOOK_SECRET_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64"),
});
let cleaning: Promise<void> | undefined;
/** Why the run is being stopped from outside (a signal, the watchdog), if it is. */
let stopping: string | undefined;

/** Stops every process, closes the JWKS server and removes the state; once, whoever asks first. */
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    await stopAll();
    jwks?.close();
    reportKeyList?.close();
    if (state && !args["keep-state"]) rmSync(state, { recursive: true, force: true });
    else if (state) console.error(`State kept in ${state}`);
  })();
  return cleaning;
}

function stopFromOutside(reason: string, code: number) {
  if (stopping) return;
  stopping = reason;
  console.error(`\n${reason}: stopping everything.`);
  void cleanUp().finally(() => process.exit(code));
}

process.on("exit", stopAllNow);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => stopFromOutside(signal, 130));
// Each catalogue size: its seed, plus as long again for its build, requests and changes.
const catalogueSeconds = settings.catalogueSizes.reduce((sum, size) => sum + (2 * seedTimeoutMs(size)) / 1000, 0);
const watchdogSeconds = args.soak
  ? soakBudgetSeconds(soakSeconds)
  : args.catalogue
    ? catalogueSeconds
    : args["hot-path"]
      ? 180 + settings.rounds * 2 * (settings.loadSeconds + 30)
      : settings.watchdogSeconds + catalogueSeconds;
const watchdog = setTimeout(() => stopFromOutside(`The bench ran past its ${watchdogSeconds} s limit`, 1), watchdogSeconds * 1000);
watchdog.unref();

// ---- Setup ----------------------------------------------------------------------------------------

const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

async function load(worker: Worker, job: Omit<LoadJob, "url">, name: string): Promise<Measured> {
  const file = join(state!, `load-${name}.json`);
  writeFileSync(file, JSON.stringify({ ...job, url: worker.directUrl }));
  const seconds = job.amount ? 60 : job.duration;
  const before = workerCpu(worker);
  const result = await runLoad<LoadResult>(file, (seconds + 30) * 1000);
  const after = workerCpu(worker);
  if (result.errors > 0 || result.timeouts > 0) step(`  ${name}: ${result.errors} errors, ${result.timeouts} timeouts`);
  const perRequest = (ms: number) => (result.requests ? ms / result.requests : NaN);
  return {
    ...result,
    workerCpuMs: perRequest((after.runtime - before.runtime) * 1000),
    proxyCpuMs: perRequest((after.proxy - before.proxy) * 1000),
    loadCpuMs: perRequest(result.cpuMs),
  };
}

// ---- The run --------------------------------------------------------------------------------------

async function main(): Promise<Results> {
  step(
    `${mode} run: ${settings.loadKeys} Premium keys, ${settings.connections} connections, ${settings.loadSeconds} s per load × ${settings.rounds} round(s)`,
  );
  state = mkdtempSync(join(tmpdir(), "price-data-bench-"));
  const idp = await startJwks();
  jwks = idp.server;

  step(
    `bundling the ${LOADED.length} workers once; seeding 1,000 products + keys (worker state) and 10,000 products + keys (catalogue state)`,
  );
  const keys: BenchKeys = await makeKeys({ load: settings.loadKeys, exact: settings.exactKeys, revoke: settings.revocationTrials });
  const mainState = join(state, "d1");
  const catalogueState = join(state, "catalogue");
  const frozen = {} as Record<WorkerName, string>;
  await Promise.all([
    seedState(mainState, settings.products, keys.sql),
    seedState(catalogueState, settings.catalogueProducts, keys.sql),
    (async () => {
      for (const name of LOADED) frozen[name] = await freeze(CONFIGS[name], join(state!, "build", name));
    })(),
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
  mkdirSync(join(state, "logs"));
  // Every loaded worker runs as deployed (no X-Work-Counts); the second instance of ours counts work.
  // The peers need the same variables: they mount the product's request context, which checks them.
  const oursVars = {
    IDP_ISSUER: idp.issuer,
    IDP_AUDIENCE: "price-data-api",
    IDP_JWKS_URL: idp.jwksUrl,
    // Harmless where unused; required by the configuration once webhooks are in.
    WEBHOOK_SECRET_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64"),
    // The webhook latency's receiver is http://127.0.0.1 (bench/modes/webhook-latency.ts).
    WEBHOOK_ALLOW_INSECURE_URLS: "true",
  };
  const workers = {} as Record<WorkerName | "catalogue", Worker>;
  for (const name of LOADED) {
    workers[name] = await startWorker({
      name,
      config: frozen[name],
      persistTo: persist[name],
      // The peers mount the product's routes behind its request context, which validates the same configuration.
      vars: oursVars,
      log: join(state, "logs", `${name}.log`),
    });
  }
  workers.catalogue = await startWorker({
    name: "ours (10,000 products)",
    config: frozen.ours,
    persistTo: catalogueState,
    vars: { ...oursVars, EXPOSE_WORK_COUNTS: "true" },
    log: join(state, "logs", "catalogue.log"),
  });
  const probe = (url: string) => fetch(`${url}${SMALL_PATH}`, { headers: bearer(keys.probe.key), signal: AbortSignal.timeout(20_000) });
  await Promise.all(Object.values(workers).map((w) => waitReady(w, probe, 120_000)));
  // The runtime's own socket answers the probe with the data route's ETag; its inspector and debug ports do not.
  const answersLikeTheWorker = async (url: string) => {
    const res = await fetch(`${url}${SMALL_PATH}`, { headers: bearer(keys.probe.key), signal: AbortSignal.timeout(5_000) });
    await res.arrayBuffer();
    return res.status === 200 && (res.headers.get("ETag") ?? "").startsWith('"cat-');
  };
  const viaProxy: string[] = [];
  for (const worker of Object.values(workers)) if (!(await findDirectUrl(worker, answersLikeTheWorker))) viaProxy.push(worker.name);
  if (viaProxy.length > 0) step(`could not find the runtime's own socket of ${viaProxy.join(", ")}: loading through wrangler's proxy`);
  step(
    `all ready: ${Object.values(workers)
      .map((w) => `${w.name} ${w.directUrl}`)
      .join(", ")}`,
  );

  // On the instance with X-Work-Counts (its catalogue is bigger, which the counts do not depend on).
  step("work per request (ours, X-Work-Counts)");
  const work: WorkReport = await workPerRequest(
    workers.catalogue.directUrl,
    { seen: keys.seen.key, overLimit: keys.overLimit.key, overLimitPerMinute: FREE_LIMIT },
    settings.seenSamples,
  );

  // workerd evicts a Durable Object after about 10 s without requests, and a key's first request
  // after that rebuilds its object. So right before its loads each worker sees every key once:
  // the loads then measure warm keys (as a steady stream of traffic would keep them), not whichever
  // objects the previous worker's turn let go cold.
  const loadKeys = keys.load.map((k) => k.key);
  // Every key once, then quiet: right before each load, as a key idle for ~10 s is evicted and a load
  // that spreads 1,000 keys thin would otherwise wake half of them from storage.
  const warmKeys = async (name: WorkerName, label: string) => {
    await load(
      workers[name],
      { path: SMALL_PATH, connections: settings.connections, duration: 0, amount: loadKeys.length, keys: loadKeys },
      `warm-keys-${label}`,
    );
    if (!(await settle(workers[name]))) step(`${name} was still busy 5 s after its keys were used: the load starts anyway`);
  };
  const loads: Results["loads"] = { full: {}, small: {} } as Results["loads"];
  for (let round = 1; round <= settings.rounds; round++) {
    // Every other round in reverse, so that no worker always comes first (or right after another).
    for (const name of round % 2 === 1 ? LOADED : [...LOADED].reverse()) {
      step(
        `round ${round}/${settings.rounds}: ${name}: GET /products and GET ${SMALL_PATH}, ${settings.loadSeconds} s each, every key once before each`,
      );
      if (round === 1)
        await load(
          workers[name],
          { path: "/products", connections: settings.connections, duration: settings.warmupSeconds, keys: loadKeys },
          `warm-${name}`,
        );
      for (const [kind, path] of [
        ["full", "/products"],
        ["small", SMALL_PATH],
      ] as const) {
        await warmKeys(name, `${kind}-${name}-${round}`);
        const result = await load(
          workers[name],
          { path, connections: settings.connections, duration: settings.loadSeconds, keys: loadKeys },
          `${kind}-${name}-${round}`,
        );
        (loads[kind][name] ??= []).push(result);
      }
    }
  }

  step("CPU profile of the isolate: ours and floor-write, small response (every key once before each)");
  const profileLoad = (name: "ours" | "floor-write") => () =>
    load(
      workers[name],
      { path: SMALL_PATH, connections: settings.connections, duration: settings.loadSeconds, keys: loadKeys },
      `profile-${name}`,
    );
  const profileFile = (name: string) => join(ROOT, "bench/results", `profile-${name}.cpuprofile`);
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  await warmKeys("ours", "profile-ours");
  const oursProfile = await cpuProfile(workers.ours, profileLoad("ours"), profileFile("ours"));
  await warmKeys("floor-write", "profile-floor-write");
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
  const jwt = await mintToken(idp.privateJwk, { issuer: idp.issuer, audience: "price-data-api", sub: REVOKE_ACCOUNT });
  const revocations: Revocation[] = [];
  for (const key of keys.revoke) revocations.push(await revocationLag(workers.ours.directUrl, key, jwt, { beforeMs: 400, afterMs: 600 }));

  step(
    `webhook latency: ${settings.webhookSamples} price changes, one at a time, from the ingestion's answer to the receiver's 2xx (ours)`,
  );
  const hookTokens = {
    admin: await mintToken(idp.privateJwk, { issuer: idp.issuer, audience: "price-data-api", sub: "bench-admin", scope: "prices:write" }),
    account: await mintToken(idp.privateJwk, { issuer: idp.issuer, audience: "price-data-api", sub: "bench-webhooks" }),
  };
  const hooks = await webhookLatency(workers.ours.directUrl, hookTokens, settings.webhookSamples);

  step(`catalogue: GET /products on ${settings.catalogueProducts.toLocaleString("en")} products`);
  const catalogueUrl = `${workers.catalogue.directUrl}/products`;
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
    workers.catalogue,
    { path: SMALL_PATH, connections: 4, duration: 0, amount: catalogueKeys.length, keys: catalogueKeys },
    "catalogue-warm",
  );
  const catalogueFull = await load(
    workers.catalogue,
    { path: "/products", connections: 1, duration: settings.catalogueSeconds, keys: catalogueKeys },
    "catalogue-full",
  );
  const catalogue304 = await load(
    workers.catalogue,
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
  const catalogueSizes = await catalogueBySize(idp, frozen.ours);

  return {
    mode,
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
    seconds: (Date.now() - startedAt) / 1000,
  };
}

/** The catalogue snapshot at each of the run's sizes (bench/modes/catalogue.ts), one after another. */
async function catalogueBySize(idp: Jwks, config: string): Promise<CatalogueResult[]> {
  const results: CatalogueResult[] = [];
  for (const size of settings.catalogueSizes) {
    results.push(await measureCatalogue(size, { work: state!, idp, config, changes: settings.catalogueChanges, step }));
  }
  return results;
}

/** `--catalogue`: only the catalogue snapshot at the run's sizes. */
async function catalogueMain(): Promise<string> {
  state = mkdtempSync(join(tmpdir(), "price-data-catalogue-"));
  const idp = await startJwks();
  jwks = idp.server;
  const config = await freeze(CONFIGS.ours, join(state, "build", "ours"));
  const results = await catalogueBySize(idp, config);
  const text = `### Catalogue snapshot (\`npm run bench -- --catalogue${args.quick ? " --quick" : ""}${args["products-max"] ? " --products-max" : ""}\`), ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC\n\n${catalogueReport(results)}\n\n${CATALOGUE_NOTES}`;
  const out = join(ROOT, "bench/results");
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "catalogue.md"), `${text}\n`);
  writeFileSync(join(out, "catalogue.json"), `${JSON.stringify({ machine: machine(), results }, null, 2)}\n`);
  step("written to bench/results/catalogue.md and catalogue.json");
  return text;
}

/** The soak: only the real worker, on 10,000 keys (bench/modes/soak.ts). */
async function soakMain(): Promise<{ text: string; failed: boolean }> {
  step(
    `soak: ${soakSeconds} s, ${(SOAK_KEYS.underLimit + SOAK_KEYS.overLimit).toLocaleString("en")} keys, ${settings.connections} connections`,
  );
  state = mkdtempSync(join(tmpdir(), "price-data-soak-"));
  const idp = await startJwks();
  jwks = idp.server;
  const keys = await makeKeys({ load: SOAK_KEYS.underLimit, exact: SOAK_KEYS.overLimit, revoke: 0 });
  const dir = join(state, "d1");
  const [, config] = await Promise.all([seedState(dir, settings.products, keys.sql), freeze(CONFIGS.ours, join(state, "build", "ours"))]);
  mkdirSync(join(state, "logs"));
  const worker = await startWorker({
    name: "ours",
    config,
    persistTo: dir,
    vars: workerVars(idp),
    log: join(state, "logs", "ours.log"),
  });
  await waitReady(
    worker,
    (url) => fetch(`${url}${SMALL_PATH}`, { headers: bearer(keys.probe.key), signal: AbortSignal.timeout(20_000) }),
    120_000,
  );
  const direct = await findDirectUrl(worker, async (url) => {
    const res = await fetch(`${url}${SMALL_PATH}`, { headers: bearer(keys.probe.key), signal: AbortSignal.timeout(5_000) });
    await res.arrayBuffer();
    return res.status === 200;
  });
  step(`ready at ${worker.directUrl}${direct ? "" : " (through wrangler's proxy)"}; loading for ${soakSeconds} s`);
  const results = await soak({
    worker,
    underLimit: keys.load,
    overLimit: keys.exact,
    limits: { underLimit: PLAN_LIMITS.premium.per_minute, overLimit: FREE_LIMIT },
    seconds: soakSeconds,
    connections: settings.connections,
    path: SMALL_PATH,
    stateDir: state,
    accountToken: (accountId) => mintToken(idp.privateJwk, { issuer: idp.issuer, audience: "price-data-api", sub: accountId }),
    step,
  });
  const out = join(ROOT, "bench/results");
  mkdirSync(out, { recursive: true });
  const charted = await soakChart(results, join(out, "soak.png"));
  const text = soakReport(results, charted ? "soak.png" : undefined);
  writeFileSync(join(out, "soak.md"), `${text}\n`);
  writeFileSync(join(out, "soak.json"), `${JSON.stringify(results, null, 2)}\n`);
  step("written to bench/results/soak.md, soak.json and soak.png");
  return {
    text,
    failed:
      results.errors > 0 ||
      results.load.overAdmitted.length > 0 ||
      results.usage.mismatches.length > 0 ||
      results.usage.status === "failed",
  };
}

/** `--webhooks`: the real worker alone, on an empty catalogue, and the webhook latency. */
async function webhooksMain(): Promise<string> {
  state = mkdtempSync(join(tmpdir(), "price-data-hooks-"));
  const idp = await startJwks();
  jwks = idp.server;
  const config = await freeze(CONFIGS.ours, join(state, "build", "ours"));
  await wrangler(["d1", "migrations", "apply", "DB", "--local", "--persist-to", join(state, "d1")]);
  mkdirSync(join(state, "logs"));
  const worker = await startWorker({
    name: "ours",
    config,
    persistTo: join(state, "d1"),
    vars: {
      ...workerVars(idp),
      WEBHOOK_ALLOW_INSECURE_URLS: "true",
    },
    log: join(state, "logs", "ours.log"),
  });
  await waitReady(worker, (url) => fetch(`${url}/openapi.json`, { signal: AbortSignal.timeout(20_000) }), 120_000);
  step(`webhook latency: ${settings.webhookSamples} price changes, one at a time`);
  const tokens = {
    admin: await mintToken(idp.privateJwk, {
      issuer: idp.issuer,
      audience: "price-data-api",
      sub: "bench-admin",
      scope: "prices:write accounts:write",
    }),
    account: await mintToken(idp.privateJwk, { issuer: idp.issuer, audience: "price-data-api", sub: "bench-webhooks" }),
  };
  const hooks = webhookLatencyReport(await webhookLatency(worker.url, tokens, settings.webhookSamples));
  step(`the stream: ${settings.webhookSamples} price changes, one at a time; MCP tool calls beside REST`);
  // Premium (300 a minute): the MCP comparison alone makes 120 calls with the account's key.
  await fetch(`${worker.url}/admin/accounts/bench-webhooks/plan`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${tokens.admin}` },
    body: JSON.stringify({ plan: "premium" }),
  });
  return [...hooks, "", ...streamAndMcpReport(await streamAndMcp(worker.url, tokens, settings.webhookSamples))].join("\n");
}

/** `--search`: search_products' text at the catalogue sizes, index against scan (bench/modes/search.ts). */
async function searchMain(): Promise<string> {
  const runs = mode === "quick" ? 3 : 5;
  const sizes = mode === "quick" ? [2_000] : [10_000, 100_000, ...(args["products-max"] ? [1_000_000] : [])];
  state = mkdtempSync(join(tmpdir(), "price-data-search-"));
  const text = searchReport(await measureSearch(state, sizes, runs, step), runs).join("\n");
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/search.md"), `${text}\n`);
  step("written to bench/results/search.md");
  return text;
}

/** `--secret-scanning`: the real worker alone, GitHub played by the bench (bench/modes/secret-scanning.ts). */
async function secretScanningMain(): Promise<string> {
  const refusalSamples = mode === "quick" ? 5 : 20;
  const runs = mode === "quick" ? 1 : 3;
  const sizes = [1_000, 10_000];
  state = mkdtempSync(join(tmpdir(), "price-data-secret-scanning-"));
  const idp = await startJwks();
  jwks = idp.server;
  const signer = await startReportSigner();
  reportKeyList = signer.server;
  const keys = await makeKeys({ load: refusalSamples + runs * (1 + 10 * sizes.length), exact: 0, revoke: 0 });
  const dir = join(state, "d1");
  const [, config] = await Promise.all([seedState(dir, 10, keys.sql), freeze(CONFIGS.ours, join(state, "build", "ours"))]);
  mkdirSync(join(state, "logs"));
  const worker = await startWorker({
    name: "ours",
    config,
    persistTo: dir,
    vars: {
      ...workerVars(idp),
      SECRET_SCANNING_KEYS_URL: signer.url,
      EXPOSE_WORK_COUNTS: "true",
    },
    log: join(state, "logs", "ours.log"),
  });
  await waitReady(worker, (url) => fetch(`${url}/openapi.json`, { signal: AbortSignal.timeout(20_000) }), 120_000);
  await findDirectUrl(worker, async (url) => (await fetch(`${url}/openapi.json`, { signal: AbortSignal.timeout(5_000) })).ok);
  const results = await measureSecretScanning({
    url: worker.directUrl,
    signer,
    keys: keys.load,
    cpuSeconds: () => workerCpu(worker).runtime,
    refusalSamples,
    sizes,
    runs,
    step,
  });
  const text = secretScanningReport(results).join("\n");
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/secret-scanning.md"), `${text}\n`);
  writeFileSync(join(ROOT, "bench/results/secret-scanning.json"), `${JSON.stringify({ machine: machine(), results }, null, 2)}\n`);
  step("written to bench/results/secret-scanning.md and secret-scanning.json");
  return text;
}

/**
 * `--hot-path [--rounds N] [--seconds S] [--profile]`: the narrowest check of the hot path, ours against floor-write on the
 * small response only (the limiter's cost, not the body's), N rounds (3 unless told) alternating which goes
 * first, every key once and the worker idle before each load, as in the full run. A couple of minutes.
 * `--profile` then takes one more load of each under V8's sampling profiler (as the full run does) and
 * lists where each isolate's CPU went.
 */
async function hotPathMain(): Promise<string> {
  const names = ["ours", "floor-write"] as const;
  step(
    `hot path: ${names.join(" and ")}, GET ${SMALL_PATH}, ${settings.loadKeys} Premium keys, ${settings.connections} connections, ${settings.loadSeconds} s × ${settings.rounds} round(s)`,
  );
  state = mkdtempSync(join(tmpdir(), "price-data-hot-path-"));
  const idp = await startJwks();
  jwks = idp.server;
  const keys = await makeKeys({ load: settings.loadKeys, exact: 0, revoke: 0 });
  const seeded = join(state, "d1");
  const frozen = {} as Record<(typeof names)[number], string>;
  await Promise.all([
    seedState(seeded, settings.products, keys.sql),
    (async () => {
      for (const name of names) frozen[name] = await freeze(CONFIGS[name], join(state!, "build", name));
    })(),
  ]);
  cpSync(seeded, join(state, "d1-floor-write"), { recursive: true });
  mkdirSync(join(state, "logs"));
  const workers = {} as Record<(typeof names)[number], Worker>;
  for (const name of names) {
    workers[name] = await startWorker({
      name,
      config: frozen[name],
      persistTo: name === "ours" ? seeded : join(state, "d1-floor-write"),
      vars: {
        IDP_ISSUER: idp.issuer,
        IDP_AUDIENCE: "price-data-api",
        IDP_JWKS_URL: idp.jwksUrl,
        WEBHOOK_SECRET_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64"),
      },
      log: join(state, "logs", `${name}.log`),
    });
  }
  const probe = (url: string) => fetch(`${url}${SMALL_PATH}`, { headers: bearer(keys.probe.key), signal: AbortSignal.timeout(20_000) });
  await Promise.all(Object.values(workers).map((w) => waitReady(w, probe, 120_000)));
  for (const worker of Object.values(workers)) {
    const direct = await findDirectUrl(worker, async (url) => {
      const res = await fetch(`${url}${SMALL_PATH}`, { headers: bearer(keys.probe.key), signal: AbortSignal.timeout(5_000) });
      await res.arrayBuffer();
      return res.status === 200 && (res.headers.get("ETag") ?? "").startsWith('"cat-');
    });
    if (!direct) step(`could not find the runtime's own socket of ${worker.name}: loading through wrangler's proxy`);
  }
  const loadKeys = keys.load.map((k) => k.key);
  const rounds: Record<(typeof names)[number], Measured[]> = { ours: [], "floor-write": [] };
  for (let round = 1; round <= settings.rounds; round++) {
    for (const name of round % 2 === 1 ? names : [...names].reverse()) {
      await load(
        workers[name],
        { path: SMALL_PATH, connections: settings.connections, duration: 0, amount: loadKeys.length, keys: loadKeys },
        `warm-keys-${name}-${round}`,
      );
      if (!(await settle(workers[name]))) step(`${name} was still busy 5 s after its keys were used: the load starts anyway`);
      const result = await load(
        workers[name],
        { path: SMALL_PATH, connections: settings.connections, duration: settings.loadSeconds, keys: loadKeys },
        `small-${name}-${round}`,
      );
      step(
        `round ${round}: ${name} ${result.rps.toFixed(0)} req/s, ${result.workerCpuMs.toFixed(2)} ms worker CPU/request, ${result.non2xx} non-2xx, ${result.errors} errors`,
      );
      rounds[name].push(result);
    }
  }
  const profiled: string[] = [];
  if (args.profile) {
    mkdirSync(join(ROOT, "bench/results"), { recursive: true });
    for (const name of names) {
      await load(
        workers[name],
        { path: SMALL_PATH, connections: settings.connections, duration: 0, amount: loadKeys.length, keys: loadKeys },
        `warm-keys-${name}-profile`,
      );
      await settle(workers[name]);
      const hot = await cpuProfile(
        workers[name],
        () =>
          load(
            workers[name],
            { path: SMALL_PATH, connections: settings.connections, duration: settings.loadSeconds, keys: loadKeys },
            `profile-${name}`,
          ),
        join(ROOT, "bench/results", `hot-path-profile-${name}.cpuprofile`),
        25,
      );
      profiled.push(
        "",
        `| ${name}: function | where | self % |`,
        "|---|---|---:|",
        ...hot.map((f) => `| ${f.name} | ${f.where} | ${f.selfPercent.toFixed(1)} |`),
      );
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const lines = [
    `### Hot path (\`npm run bench -- --hot-path\`), ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC`,
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
    `Medians: ours ${oursRps.toFixed(0)}, floor-write ${floorRps.toFixed(0)} req/s: **${(oursRps / floorRps).toFixed(2)} × floor-write** (aim ≥ 0.9 ×); worker CPU ${cpu >= 0 ? "+" : "−"}${Math.abs(cpu).toFixed(2)} ms/request.`,
    ...(profiled.length > 0 ? ["", "Where the CPU goes (self time, % of the isolate's busy time, one more load each):", ...profiled] : []),
  );
  const text = lines.join("\n");
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/hot-path.md"), `${text}\n`);
  writeFileSync(join(ROOT, "bench/results/hot-path.json"), `${JSON.stringify({ machine: machine(), settings, rounds }, null, 2)}\n`);
  step("written to bench/results/hot-path.md and hot-path.json");
  return text;
}

function machine() {
  const model = cpus()[0]?.model ?? "unknown CPU";
  return { cores: availableParallelism(), model, memoryGb: Math.round(totalmem() / 2 ** 30), node: process.version };
}

try {
  if (args.soak) {
    // Correctness decides the exit code; memory flatness and throughput are measurements to read.
    const { text, failed } = await soakMain();
    console.log(`\n${text}`);
    await cleanUp();
    process.exit(failed ? 1 : 0);
  }
  if (args.webhooks) {
    console.log(`\n${await webhooksMain()}`);
    await cleanUp();
    process.exit(0);
  }
  if (args.search) {
    console.log(`\n${await searchMain()}`);
    await cleanUp();
    process.exit(0);
  }
  if (args["secret-scanning"]) {
    console.log(`\n${await secretScanningMain()}`);
    await cleanUp();
    process.exit(0);
  }
  if (args["hot-path"]) {
    console.log(`\n${await hotPathMain()}`);
    await cleanUp();
    process.exit(0);
  }
  if (args.catalogue) {
    console.log(`\n${await catalogueMain()}`);
    await cleanUp();
    process.exit(0);
  }
  const results = await main();
  const text = report(results);
  console.log(`\n${text}`);
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/latest.md"), `${text}\n`);
  writeFileSync(join(ROOT, "bench/results/latest.json"), `${JSON.stringify(results, null, 2)}\n`);
  step("written to bench/results/latest.md and latest.json");
  // Only a full run's figures are worth publishing; a quick run is a smoke test.
  if (mode === "full") {
    const docPath = join(ROOT, "docs/benchmark.md");
    writeFileSync(docPath, withResults(readFileSync(docPath, "utf8"), text));
    step("results written to docs/benchmark.md");
  }
  await cleanUp();
  process.exit(0);
} catch (error) {
  // Stopped from outside: stopFromOutside() reports, cleans up and exits.
  if (!stopping) {
    console.error(`\nThe bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await cleanUp();
    process.exit(1);
  }
}
