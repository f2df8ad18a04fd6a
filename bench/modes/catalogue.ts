/**
 * The catalogue snapshot (docs/catalogue.md) at one size, under `wrangler dev`: a part of
 * `npm run bench` (bench/modes/catalogue-sizes.ts runs it at 10,000 and 100,000 products, `--products-max` adds
 * 1,000,000, `--quick` 2,000). Each size gets a freshly seeded D1 and a worker of its own: the full
 * build its first request sets off, GET /products (time to first byte, total time, bytes with and
 * without gzip, D1 round trips), 304, filters, the isolate's heap while building and while serving
 * (in use, and live after a forced collection), one-product changes: their rebuild time (the
 * builder's log) and the time until GET /products serves them.
 */
import { cpSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { generateApiKey, hashApiKey } from "../../src/api-keys/format.ts";
import type { BuildReport, BuildWork } from "../../src/catalogue/snapshot/build-report.ts";
import { formatMoney } from "../../src/platform/money.ts";
import { heapUsage, type InspectorSession, liveHeapUsage, openInspector } from "../harness/inspector.ts";
import { makeKeys } from "../harness/keys.ts";
import { findDirectUrl, startWorker, stopWorker, type Worker, waitReady, workerCpu, wrangler } from "../harness/processes.ts";
import { seedState } from "../harness/setup.ts";
import { filteredReadRows, measureFilteredReads } from "./catalogue-filters.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How often the heap is read while building and serving: in use (cheap), and live (a full collection each time). */
const USED_EVERY_MS = 200;
const LIVE_EVERY_MS = 500;

/** Seeding takes about 1 s per 1,000 products locally; its timeout leaves room. */
export const seedTimeoutMs = (products: number) => 120_000 + products * 3;

export interface CatalogueContext {
  /** Where the state, SQL and logs go. */
  work: string;
  /** The real worker's variables (the run's IdP and webhook secret key, bench/harness/bench.ts). */
  vars: Record<string, string>;
  /** The run's token with prices:write, for the ingestions. */
  adminToken: string;
  /** The real worker's frozen configuration (bench/harness/processes.ts freeze()). */
  config: string;
  /** How many one-product changes to time. */
  changes: number;
  step: (text: string) => void;
}

interface Timed {
  status: number;
  ttfbMs: number;
  totalMs: number;
  bytes: number;
  headers: Record<string, string | string[] | undefined>;
}

/** One GET with node:http (which never decodes gzip): the bytes on the wire, and when they came. */
function timedGet(url: string, headers: Record<string, string>): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(url, { headers, timeout: 900_000 }, (res) => {
      const ttfbMs = performance.now() - started;
      let bytes = 0;
      res.on("data", (chunk: Buffer) => (bytes += chunk.length));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, ttfbMs, totalMs: performance.now() - started, bytes, headers: res.headers }),
      );
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** The first line of a streamed body; the rest is not read. */
async function firstLine(url: string, headers: Record<string, string>): Promise<string> {
  const res = await fetch(url, { headers });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { done, value } = await reader.read();
    if (done) break;
    text += value;
  }
  await reader.cancel();
  return text.slice(0, text.indexOf("\n"));
}

interface HeapPeaks {
  /** V8's heap in use, garbage not yet collected included. */
  usedMb: number;
  /** The heap after a forced full collection: what is still referenced. */
  liveMb: number;
  /** ArrayBuffer backing stores (R2 bodies in flight, compression buffers). */
  buffersMb: number;
}

/**
 * Reads the isolate's heap until stopped, on one inspector session (wrangler's proxy keeps only
 * one): in use every USED_EVERY_MS; with `live`, every LIVE_EVERY_MS the live heap instead, after
 * a forced full collection (which also keeps the heap in use low). Returns the peaks.
 */
function heapSampler(worker: Worker, live: boolean) {
  const peaks: HeapPeaks = { usedMb: 0, liveMb: 0, buffersMb: 0 };
  let running = true;
  const loop = (async () => {
    let session: InspectorSession | undefined;
    let lastLive = 0;
    while (running) {
      const started = Date.now();
      try {
        session ??= await openInspector(worker);
        if (live && started - lastLive >= LIVE_EVERY_MS) {
          lastLive = started;
          peaks.liveMb = Math.max(peaks.liveMb, (await liveHeapUsage(session, worker)).usedMb);
        } else {
          const heap = await heapUsage(session);
          peaks.usedMb = Math.max(peaks.usedMb, heap.usedMb);
          peaks.buffersMb = Math.max(peaks.buffersMb, heap.buffersMb);
        }
      } catch {
        session?.close(); // a reading that failed: the next one opens a new session
        session = undefined;
      }
      await sleep(Math.max(0, started + USED_EVERY_MS - Date.now()));
    }
    session?.close();
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return peaks;
    },
  };
}

/** The builder's reports from the worker's log (src/catalogue/snapshot/builder.ts logs each build). */
function buildReports(log: string): BuildReport[] {
  return readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => line.includes('"event":"catalogue_build"'))
    .map((line) => JSON.parse(line.slice(line.indexOf("{"))));
}

/** The real worker under `wrangler dev` on the state `dir`, its log at level "log" (the builder's reports); stopped after `use`. */
export async function onWorker<T>(
  name: string,
  dir: string,
  context: CatalogueContext,
  use: (worker: Worker, log: string) => Promise<T>,
): Promise<T> {
  const log = `${dir}.log`;
  const worker = await startWorker({
    name,
    config: context.config,
    persistTo: dir,
    vars: { ...context.vars, EXPOSE_WORK_COUNTS: "true" },
    log,
    logLevel: "log",
  });
  try {
    await waitReady(worker, (url) => fetch(url), 120_000);
    await findDirectUrl(worker, async (url) => (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok);
    return await use(worker, log);
  } finally {
    await stopWorker(worker);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A test key's GET /products beside the live key's, on the same worker: its account's sandbox (1,000 generated products and
 * the account's changes: src/sandbox/). The first is the isolate's first sandbox read (it generates the hour's base).
 */
async function sandboxReads(worker: Worker, sandboxKey: string) {
  const url = `${worker.directUrl}/products`;
  const auth = { Authorization: `Bearer ${sandboxKey}` };
  const first = await timedGet(url, { ...auth, "Accept-Encoding": "gzip" });
  if (first.status !== 200) throw new Error(`GET /products with a test key answered ${first.status}`);
  return {
    first: await transferOf(first),
    gzip: await transferOf(await timedGet(url, { ...auth, "Accept-Encoding": "gzip" })),
    identity: await transferOf(await timedGet(url, { ...auth, "Accept-Encoding": "identity" })),
    categoryGzip: await transferOf(await timedGet(`${url}?category=coffee%20machines`, { ...auth, "Accept-Encoding": "gzip" })),
  };
}

const header = (t: Timed, name: string) => String(t.headers[name] ?? "");
const transferOf = (t: Timed) => ({
  ttfbMs: t.ttfbMs,
  totalMs: t.totalMs,
  bytes: t.bytes,
  encoding: header(t, "content-encoding") || "identity",
  work: header(t, "x-work-counts"),
});

/** A test key of an account of its own, as SQL beside the bench's keys (bench/harness/keys.ts stores them so). */
export async function sandboxKeySql() {
  const { key, prefix } = generateApiKey("pda", "test");
  const sql =
    "INSERT INTO accounts (id, plan) VALUES ('bench-sandbox', 'premium');\n" +
    "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, environment) VALUES " +
    `('key_bench_sandbox', 'bench-sandbox', 'bench sandbox', '${prefix}', '${await hashApiKey(key)}', 'active', 'test');\n`;
  return { key, sql };
}

/**
 * GET `url` once the first full build is published (the first request pokes the builder; 503 until it is done). It
 * waits with a filtered request matching nothing: each whole-list request counts in the key's whole-list budget (60
 * an hour), which a build of a million products' minutes of polling would exhaust.
 */
export async function afterFirstBuild(url: string, headers: Record<string, string>): Promise<Timed> {
  let waiting = await timedGet(`${url}?sku=bench-none`, headers);
  // A million products' build takes minutes: polling faster than the key's plan allows is a 429, which is waited out too.
  while (waiting.status === 503 || waiting.status === 429) {
    await sleep(waiting.status === 429 ? 1000 * Math.min(60, Number(waiting.headers["retry-after"] ?? 1)) : 250);
    waiting = await timedGet(`${url}?sku=bench-none`, headers);
  }
  // Then the whole list, a few times at most should this isolate not have seen the new snapshot yet.
  let whole = await timedGet(url, headers);
  for (let tries = 0; whole.status === 503 && tries < 10; tries++) {
    await sleep(1000 * Math.min(30, Number(whole.headers["retry-after"] ?? 2)));
    whole = await timedGet(url, headers);
  }
  return whole;
}

/** The first full build (the first request pokes the builder; 503 until it is done), then every kind of GET /products, each with the heap's peaks. */
async function buildAndServe(worker: Worker, key: string, live: boolean) {
  const url = `${worker.directUrl}/products`;
  const auth = { Authorization: `Bearer ${key}` };
  const gzip = { ...auth, "Accept-Encoding": "gzip" };
  const building = heapSampler(worker, live);
  const buildStarted = performance.now();
  const cpuBefore = workerCpu(worker).runtime;
  const first = await afterFirstBuild(url, auth);
  const fullBuildServedMs = performance.now() - buildStarted;
  const fullBuildCpuS = workerCpu(worker).runtime - cpuBefore;
  const heapBuilding = await building.stop();
  if (first.status !== 200) throw new Error(`GET /products answered ${first.status}`);

  const serving = heapSampler(worker, live);
  const identity = await timedGet(url, { ...auth, "Accept-Encoding": "identity" });
  const zipped = await timedGet(url, gzip);
  const ndjson = await timedGet(url, { ...gzip, Accept: "application/x-ndjson" });
  const concurrent = await Promise.all(Array.from({ length: 4 }, () => timedGet(url, { ...auth, "Accept-Encoding": "identity" })));
  const notModified = await timedGet(url, { ...gzip, "If-None-Match": String(zipped.headers.etag) });
  const small = await timedGet(`${url}?sku=bench-none`, auth);
  const skipped = await timedGet(`${url}?updated_since=2100-01-01`, auth);
  const category = await timedGet(`${url}?category=headphones`, gzip);
  // The stored bytes beside the same list converted (parsed, converted and compressed again), with the runtime's CPU.
  const withCpu = async (target: string) => {
    const before = workerCpu(worker).runtime;
    const timed = await timedGet(target, gzip);
    return { ...timed, cpuS: workerCpu(worker).runtime - before };
  };
  const plainWithCpu = await withCpu(url);
  const converted = await withCpu(`${url}?currency=EUR`);
  const heapServing = await serving.stop();
  const transfer = transferOf;
  return {
    fullBuildServedMs,
    fullBuildCpuS,
    identity: transfer(identity),
    gzip: transfer(zipped),
    ndjsonGzip: transfer(ndjson),
    concurrentIdentityTotalMs: Math.max(...concurrent.map((t) => t.totalMs)),
    notModified: { ...transfer(notModified), status: notModified.status },
    smallFiltered: transfer(small),
    updatedSinceNone: transfer(skipped),
    categoryGzip: transfer(category),
    plainGzip: { ...transfer(plainWithCpu), cpuS: plainWithCpu.cpuS },
    convertedGzip: { ...transfer(converted), cpuS: converted.cpuS, status: converted.status },
    heapBuilding,
    heapServing,
  };
}

/** One-product changes, one at a time: from the ingestion's answer until GET /products serves a new ETag. */
async function oneProductChanges(worker: Worker, key: string, context: CatalogueContext): Promise<number[]> {
  const url = `${worker.directUrl}/products`;
  const gzip = { Authorization: `Bearer ${key}`, "Accept-Encoding": "gzip" };
  const admin = context.adminToken;
  const product = JSON.parse(await firstLine(url, { Authorization: `Bearer ${key}`, Accept: "application/x-ndjson" })) as {
    sku: string;
    name: string;
    offers: { competitor_id: string; competitor_name: string; currency: string }[];
  };
  const offer = product.offers[0]!;
  const changes: number[] = [];
  for (let i = 0; i < context.changes; i++) {
    const before = String((await timedGet(url, gzip)).headers.etag);
    const observation = {
      sku: product.sku,
      name: product.name,
      competitor: { id: offer.competitor_id, name: offer.competitor_name },
      price: `${100 + i}.00`,
      currency: offer.currency,
      in_stock: true,
    };
    const res = await fetch(`${worker.directUrl}/admin/observations`, {
      method: "POST",
      headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
      body: JSON.stringify({ observations: [observation] }),
    });
    if (!res.ok) throw new Error(`POST /admin/observations answered ${res.status}: ${await res.text()}`);
    const answered = performance.now();
    while ((await timedGet(url, { ...gzip, "If-None-Match": before })).status !== 200) await sleep(50);
    changes.push(performance.now() - answered);
    await sleep(1000);
  }
  await sleep(500); // the last build's log line
  return changes;
}

/** One offer of each of `count` products picked at random, read from the seeded D1 before the worker starts. */
export async function randomOffers(dir: string, count: number) {
  const query =
    "SELECT p.sku, p.name, o.competitor_id, c.name AS competitor_name, o.currency, o.price_minor FROM products p " +
    `JOIN offers o ON o.product_id = p.id JOIN competitors c ON c.id = o.competitor_id WHERE p.id IN (SELECT id FROM products ORDER BY random() LIMIT ${count}) GROUP BY p.id`;
  const out = await wrangler(["d1", "execute", "DB", "--local", "--persist-to", dir, "--json", "--command", query], 300_000);
  return (
    JSON.parse(out.slice(out.indexOf("["))) as {
      results: { sku: string; name: string; competitor_id: string; competitor_name: string; currency: string; price_minor: number }[];
    }[]
  )[0]!.results;
}

/** Each offer's observation with its price raised by `raise` minor units: a price change each. */
export const priceChanges = (offers: Awaited<ReturnType<typeof randomOffers>>, raise: number) =>
  offers.map((offer) => ({
    sku: offer.sku,
    name: offer.name,
    competitor: { id: offer.competitor_id, name: offer.competitor_name },
    price: formatMoney(offer.price_minor + raise, offer.currency),
    currency: offer.currency,
    in_stock: true,
  }));

/**
 * A scattered change: one ingestion of SCATTERED products picked at random (a new price each), then
 * GET /products until it serves a new ETag. Returns the time from the ingestion's answer until then,
 * the runtime's CPU meanwhile, and the builds that ran.
 */
async function scatteredChange(
  worker: Worker,
  key: string,
  log: string,
  context: CatalogueContext,
  offers: Awaited<ReturnType<typeof randomOffers>>,
) {
  const url = `${worker.directUrl}/products`;
  const gzip = { Authorization: `Bearer ${key}`, "Accept-Encoding": "gzip" };
  const admin = context.adminToken;
  const before = String((await timedGet(url, gzip)).headers.etag);
  const reportsBefore = buildReports(log).length;
  const observations = priceChanges(offers, 1);
  const cpuBefore = workerCpu(worker).runtime;
  const res = await fetch(`${worker.directUrl}/admin/observations`, {
    method: "POST",
    headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
    body: JSON.stringify({ observations }),
  });
  if (!res.ok) throw new Error(`POST /admin/observations answered ${res.status}: ${await res.text()}`);
  const answered = performance.now();
  while ((await timedGet(url, { ...gzip, "If-None-Match": before })).status !== 200) await sleep(50);
  const servedMs = performance.now() - answered;
  const cpuS = workerCpu(worker).runtime - cpuBefore;
  await sleep(500); // the build's log line
  return { products: offers.length, servedMs, cpuS, builds: buildReports(log).slice(reportsBefore) };
}

/**
 * One ingestion of the given offers (a new price each) as today's observations, and one with the fields of the contract's
 * "Comparable prices" too (seller, condition, quantity and unit, shipping): its answer time and the runtime's CPU.
 */
async function ingestionWith(worker: Worker, context: CatalogueContext, offers: Awaited<ReturnType<typeof randomOffers>>, step: number) {
  const terms = { seller: "Bench Seller GmbH", condition: "refurbished", quantity: "500", unit: "g" };
  const observations = priceChanges(offers, step).map((observation) =>
    step === 2 ? { ...observation, ...terms, shipping_cost: formatMoney(499, observation.currency) } : observation,
  );
  const cpuBefore = workerCpu(worker).runtime;
  const started = performance.now();
  const res = await fetch(`${worker.directUrl}/admin/observations`, {
    method: "POST",
    headers: { Authorization: `Bearer ${context.adminToken}`, "Content-Type": "application/json" },
    body: JSON.stringify({ observations }),
  });
  if (!res.ok) throw new Error(`POST /admin/observations answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
  return { answeredMs: performance.now() - started, cpuS: workerCpu(worker).runtime - cpuBefore };
}

/** Products changed by the scattered change (bench/run.ts --catalogue). */
const SCATTERED = 1000;

/**
 * One size, in two passes on two copies of one seeded state, each on a worker of its own. The
 * first gives the timings and the heap in use as V8 lets it grow; the second, the live heap: its
 * forced collections would disturb the first's timings and keep its heap in use low.
 */
export async function measureCatalogue(size: number, context: CatalogueContext) {
  const label = `catalogue, ${size.toLocaleString("en")} products`;
  const keys = await makeKeys({ load: 1, exact: 0, revoke: 0 });
  const key = keys.load[0]!.key;
  const sandbox = await sandboxKeySql();
  const dir = join(context.work, `catalogue-${size}`);
  context.step(`${label}: seeding`);
  const seedStarted = performance.now();
  await seedState(dir, size, keys.sql + sandbox.sql, seedTimeoutMs(size));
  const seedMs = performance.now() - seedStarted;
  const scatteredOffers = await randomOffers(dir, SCATTERED);
  cpSync(dir, `${dir}-live`, { recursive: true });

  context.step(`${label}: full build, GET /products, ${context.changes} one-product change(s)`);
  const timed = await onWorker(label, dir, context, async (worker, log) => {
    const measured = await buildAndServe(worker, key, false);
    context.step(`${label}: a test key's GET /products (the sandbox) beside the live key's`);
    const sandboxProducts = await sandboxReads(worker, sandbox.key);
    context.step(`${label}: filtered reads`);
    const filteredReads = await measureFilteredReads(worker, key);
    const changeServedMs = await oneProductChanges(worker, key, context);
    const reports = buildReports(log);
    const scattered = await scatteredChange(worker, key, log, context, scatteredOffers);
    await sleep(2000); // the scattered change's builds
    const ingestionPlain = await ingestionWith(worker, context, scatteredOffers, 3);
    await sleep(2000);
    const ingestionComparable = await ingestionWith(worker, context, scatteredOffers, 2);
    return { ...measured, sandboxProducts, filteredReads, changeServedMs, reports, scattered, ingestionPlain, ingestionComparable };
  });
  context.step(`${label}: the same build and requests again, reading the live heap`);
  const live = await onWorker(`${label} (live heap)`, `${dir}-live`, context, (worker) => buildAndServe(worker, key, true));

  const { reports, heapBuilding, heapServing, ...rest } = timed;
  const full = reports.find((r) => r.full);
  const incremental = reports.filter((r) => !r.full);
  return {
    products: size,
    seedMs,
    fullBuildMs: full?.ms,
    fullBuild: full,
    segments: full?.segmentsWritten,
    ...rest,
    heapBuilding: { ...heapBuilding, liveMb: live.heapBuilding.liveMb },
    heapServing: { ...heapServing, liveMb: live.heapServing.liveMb },
    oneProductRebuildMs: incremental.map((r) => r.ms),
    oneProductSegmentsWritten: incremental.map((r) => r.segmentsWritten),
  };
}

export type CatalogueResult = Awaited<ReturnType<typeof measureCatalogue>>;

const ms = (n: number | undefined) => (n === undefined ? "–" : n >= 10_000 ? `${(n / 1000).toFixed(1)} s` : `${Math.round(n)} ms`);
const mib = (n: number) => (n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(2)} MiB` : `${(n / 1024).toFixed(1)} KiB`);
const heap = (building: number, serving: number) => `${building.toFixed(1)} / ${serving.toFixed(1)} MiB`;

const pct = (share: number) => `${(100 * share).toFixed(1)} %`;
const sumWork = (builds: readonly BuildReport[], field: keyof BuildWork) => builds.reduce((sum, build) => sum + build.work[field], 0);

function fullBuildCell(r: CatalogueResult): string {
  const b = r.fullBuild;
  if (!b) return "–";
  return `${b.steps} steps / ${ms(b.ms)}, ${r.fullBuildCpuS.toFixed(1)} s CPU, ${b.work.d1Statements.toLocaleString("en")} (${b.work.d1.toLocaleString("en")}), ${b.work.r2Reads} + ${b.work.r2Writes}`;
}

function largestStepCell(b: BuildReport | undefined): string {
  if (!b) return "–";
  const s = b.largestStep;
  return `${s.d1Statements}, ${s.r2Reads} + ${s.r2Writes}, ${s.productsEncoded.toLocaleString("en")} / ${ms(s.ms)}`;
}

function scatteredWorkCell(r: CatalogueResult): string {
  const builds = r.scattered.builds;
  const encoded = sumWork(builds, "productsEncoded");
  const full = r.fullBuild?.work.productsEncoded ?? r.products;
  const steps = builds.reduce((sum, build) => sum + build.steps, 0);
  return (
    `${encoded.toLocaleString("en")} (${pct(encoded / full)}), ${sumWork(builds, "partsEncoded")}, ${sumWork(builds, "segmentsWritten")}, ${steps}, ` +
    `${sumWork(builds, "r2Reads")} + ${sumWork(builds, "r2Writes")}, ${sumWork(builds, "d1Statements")} (${builds.length} build${builds.length === 1 ? "" : "s"})`
  );
}

function scatteredShareCell(r: CatalogueResult): string {
  const full = r.fullBuild;
  if (!full) return "–";
  const builds = r.scattered.builds;
  const wall = builds.reduce((sum, build) => sum + build.ms, 0);
  return `${pct(wall / full.ms)}, ${pct(sumWork(builds, "r2BytesWritten") / full.work.r2BytesWritten)}, ${pct(sumWork(builds, "d1RowsRead") / full.work.d1RowsRead)}`;
}

/** The measurements as a markdown table, one column per size. */
export function catalogueReport(results: readonly CatalogueResult[]): string {
  const rows: [string, (r: CatalogueResult) => string][] = [
    ["seed (scripts/seed.ts, then the keys)", (r) => ms(r.seedMs)],
    ["full build (builder's log) / until served", (r) => `${ms(r.fullBuildMs)} / ${ms(r.fullBuildServedMs)} (${r.segments} segments)`],
    [
      "GET /products gzip: TTFB / total / bytes",
      (r) => `${ms(r.gzip.ttfbMs)} / ${ms(r.gzip.totalMs)} / ${mib(r.gzip.bytes)} (${r.gzip.encoding})`,
    ],
    [
      "GET /products identity: TTFB / total / bytes",
      (r) => `${ms(r.identity.ttfbMs)} / ${ms(r.identity.totalMs)} / ${mib(r.identity.bytes)} (${r.identity.encoding})`,
    ],
    ["NDJSON gzip: total / bytes", (r) => `${ms(r.ndjsonGzip.totalMs)} / ${mib(r.ndjsonGzip.bytes)}`],
    ["4 concurrent identity: slowest total", (r) => ms(r.concurrentIdentityTotalMs)],
    ["X-Work-Counts, unfiltered", (r) => r.gzip.work],
    ["304: status / total / work", (r) => `${r.notModified.status} / ${ms(r.notModified.totalMs)} / ${r.notModified.work}`],
    ["?sku=none (small response): total / work", (r) => `${ms(r.smallFiltered.totalMs)} / ${r.smallFiltered.work}`],
    ["?updated_since=future (all segments skipped): total", (r) => ms(r.updatedSinceNone.totalMs)],
    ["?category=headphones gzip (about 10 %): total / bytes", (r) => `${ms(r.categoryGzip.totalMs)} / ${mib(r.categoryGzip.bytes)}`],
    [
      "GET /products gzip (stored bytes): total / runtime CPU / bytes",
      (r) => `${ms(r.plainGzip.totalMs)} / ${r.plainGzip.cpuS.toFixed(2)} s / ${mib(r.plainGzip.bytes)}`,
    ],
    [
      "GET /products?currency=EUR gzip (every product converted): total / runtime CPU / bytes / work",
      (r) =>
        `${ms(r.convertedGzip.totalMs)} / ${r.convertedGzip.cpuS.toFixed(2)} s / ${mib(r.convertedGzip.bytes)} / ${r.convertedGzip.work}`,
    ],
    [
      "test key (sandbox, 1,000 products) gzip: TTFB / total / bytes / work",
      (r) =>
        `${ms(r.sandboxProducts.gzip.ttfbMs)} / ${ms(r.sandboxProducts.gzip.totalMs)} / ${mib(r.sandboxProducts.gzip.bytes)} / ${r.sandboxProducts.gzip.work}`,
    ],
    [
      "test key identity: total / bytes; first in the isolate (generates the base): total",
      (r) => `${ms(r.sandboxProducts.identity.totalMs)} / ${mib(r.sandboxProducts.identity.bytes)}; ${ms(r.sandboxProducts.first.totalMs)}`,
    ],
    [
      "test key ?category=coffee machines gzip (12.5 %): total / bytes",
      (r) => `${ms(r.sandboxProducts.categoryGzip.totalMs)} / ${mib(r.sandboxProducts.categoryGzip.bytes)}`,
    ],
    ...filteredReadRows<CatalogueResult>(),
    ["isolate heap in use, peak (garbage included): building / serving", (r) => heap(r.heapBuilding.usedMb, r.heapServing.usedMb)],
    ["isolate heap live, peak (after a forced full GC): building / serving", (r) => heap(r.heapBuilding.liveMb, r.heapServing.liveMb)],
    ["ArrayBuffers, peak: building / serving", (r) => heap(r.heapBuilding.buffersMb, r.heapServing.buffersMb)],
    [
      "full build in steps: steps / whole build: wall, runtime CPU, D1 statements (round trips), R2 reads + writes",
      (r) => fullBuildCell(r),
    ],
    [
      "full build: largest step (most D1 statements): D1 statements, R2 reads + writes, products encoded / longest step's wall time",
      (r) => largestStepCell(r.fullBuild),
    ],
    [
      `${SCATTERED.toLocaleString("en")} products changed at random in one ingestion: answered → served, runtime CPU meanwhile`,
      (r) => `${ms(r.scattered.servedMs)}, ${r.scattered.cpuS.toFixed(2)} s CPU`,
    ],
    [
      "… its builds: products encoded (share of a full build), parts, segments written, steps, R2 reads + writes, D1 statements",
      (r) => scatteredWorkCell(r),
    ],
    ["… CPU as a share of the full build's", (r) => pct(r.scattered.cpuS / r.fullBuildCpuS)],
    ["… its builds' wall time, bytes written, D1 rows read: shares of the full build's", (r) => scatteredShareCell(r)],
    ["… its largest step", (r) => largestStepCell(r.scattered.builds.at(-1))],
    [
      `an ingestion of ${SCATTERED.toLocaleString("en")} price changes: answered / runtime CPU, without → with seller, condition, quantity, shipping`,
      (r) =>
        `${ms(r.ingestionPlain.answeredMs)} / ${r.ingestionPlain.cpuS.toFixed(2)} s → ${ms(r.ingestionComparable.answeredMs)} / ` +
        `${r.ingestionComparable.cpuS.toFixed(2)} s`,
    ],
    [
      "one-product rebuild (builder's log)",
      (r) => `${r.oneProductRebuildMs.map(ms).join(", ")} (segments written: ${r.oneProductSegmentsWritten.join(", ")})`,
    ],
    ["ingestion answered → change served", (r) => r.changeServedMs.map(ms).join(", ")],
  ];
  const head = `| | ${results.map((r) => `${r.products.toLocaleString("en")} products`).join(" | ")} |\n|---|${results.map(() => "---:").join("|")}|`;
  return [head, ...rows.map(([name, cell]) => `| ${name} | ${results.map(cell).join(" | ")} |`)].join("\n");
}

/** What the table's heap rows mean, for the report. */
export const CATALOGUE_NOTES =
  `Each size on a freshly seeded local D1, measured twice on two copies of it, each on a worker of its own (\`wrangler dev\`; the CatalogueBuilder object runs in the worker's isolate there, so the building peaks include it). ` +
  `The first run gives the timings and the heap in use (read through the inspector every ${USED_EVERY_MS} ms: what V8 reports, garbage it has not collected yet included); ` +
  `the second repeats the build and the requests and reads the live heap every ${LIVE_EVERY_MS} ms, after a forced full collection (what is still referenced). ` +
  '"identity" sends `Accept-Encoding: identity`: the worker decompresses the stored gzip on the way.';
