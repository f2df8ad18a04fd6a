/**
 * `npm run bench:catalogue [-- --quick] [--products-max]`
 *
 * The catalogue snapshot (docs/catalogue.md) under `wrangler dev`, at 10,000 and 100,000 products
 * (`--quick`: 2,000; `--products-max` adds 1,000,000): the full build after a seed, GET /products
 * (time to first byte, total time, bytes with and without gzip, D1 round trips), 304, the worker
 * isolate's heap (inspector) at its peak while building and while serving, and a one-product change:
 * its rebuild time (the builder's log) and the time until GET /products serves it.
 * Writes bench/results/catalogue.md and catalogue.json.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { mintToken } from "../scripts/mint-token.ts";
import { makeKeys } from "./keys.ts";
import { findDirectUrl, freeze, isolateHeap, ROOT, startWorker, stopAll, waitReady, type Worker } from "./processes.ts";
import { seedState, startJwks } from "./setup.ts";
import { CONFIGS } from "./workers.ts";

const { values: args } = parseArgs({ options: { quick: { type: "boolean", default: false }, "products-max": { type: "boolean", default: false } } });
const sizes = args.quick ? [2_000] : [10_000, 100_000, ...(args["products-max"] ? [1_000_000] : [])];
const step = (text: string) => console.log(`[catalogue bench] ${text}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
    const req = request(url, { headers, timeout: 600_000 }, (res) => {
      const ttfbMs = performance.now() - started;
      let bytes = 0;
      res.on("data", (chunk: Buffer) => (bytes += chunk.length));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, ttfbMs, totalMs: performance.now() - started, bytes, headers: res.headers }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** The isolate's heap, sampled every 200 ms until stopped: the peak in MiB. */
function heapSampler(worker: Worker) {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const heap = await isolateHeap(worker);
      if (heap) peak = Math.max(peak, heap.usedMb);
      await sleep(200);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return peak;
    },
  };
}

/** The builder's reports from the worker's log (src/catalogue/builder.ts logs each build). */
function buildReports(log: string): { ms: number; full: boolean; segmentsWritten: number; products: number }[] {
  return readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => line.includes('"event":"catalogue_build"'))
    .map((line) => JSON.parse(line.slice(line.indexOf("{"))));
}

async function measure(size: number, work: string, idp: Awaited<ReturnType<typeof startJwks>>, config: string) {
  const keys = await makeKeys({ load: 1, exact: 0, revoke: 0 });
  const key = keys.load[0]!.key;
  const dir = join(work, `state-${size}`);
  step(`${size.toLocaleString("en")} products: seeding`);
  await seedState(work, dir, size, keys.sql, 1_800_000);
  const log = join(work, `worker-${size}.log`);
  const worker = await startWorker({
    name: `catalogue-${size}`,
    config,
    persistTo: dir,
    vars: {
      IDP_ISSUER: idp.issuer,
      IDP_AUDIENCE: "price-data-api",
      IDP_JWKS_URL: idp.jwksUrl,
      EXPOSE_WORK_COUNTS: "true",
      WEBHOOK_SECRET_KEY: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64"),
    },
    log,
    logLevel: "log",
  });
  await waitReady(worker, (url) => fetch(url), 120_000);
  await findDirectUrl(worker, async (url) => (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok);
  const url = `${worker.directUrl}/products`;
  const auth = { Authorization: `Bearer ${key}` };

  step(`${size.toLocaleString("en")} products: full build (the first request pokes the builder; 503 until it is done)`);
  const building = heapSampler(worker);
  const buildStarted = performance.now();
  let first = await timedGet(url, auth);
  while (first.status === 503) {
    await sleep(100);
    first = await timedGet(url, auth);
  }
  const fullBuildServedMs = performance.now() - buildStarted;
  const heapBuildingMb = await building.stop();
  if (first.status !== 200) throw new Error(`GET /products answered ${first.status}`);

  step(`${size.toLocaleString("en")} products: serving`);
  const serving = heapSampler(worker);
  const identity = await timedGet(url, auth);
  const gzip = await timedGet(url, { ...auth, "Accept-Encoding": "gzip" });
  const ndjson = await timedGet(url, { ...auth, "Accept-Encoding": "gzip", Accept: "application/x-ndjson" });
  const concurrent = await Promise.all(Array.from({ length: 4 }, () => timedGet(url, auth)));
  const etag = String(gzip.headers.etag);
  const notModified = await timedGet(url, { ...auth, "Accept-Encoding": "gzip", "If-None-Match": etag });
  const small = await timedGet(`${url}?sku=bench-none`, auth);
  const filtered = await timedGet(`${url}?updated_since=2100-01-01`, auth);
  const heapServingMb = await serving.stop();

  step(`${size.toLocaleString("en")} products: one-product changes`);
  const admin = await mintToken(idp.privateJwk, { issuer: idp.issuer, audience: "price-data-api", sub: "bench-admin", scope: "prices:write" });
  const firstLine = await (await fetch(url, { headers: { ...auth, Accept: "application/x-ndjson" } })).text();
  const product = JSON.parse(firstLine.slice(0, firstLine.indexOf("\n"))) as { sku: string; name: string; offers: { competitor_id: string; competitor_name: string; currency: string }[] };
  const offer = product.offers[0]!;
  const changes: number[] = [];
  for (let i = 0; i < 3; i++) {
    const before = String((await timedGet(url, { ...auth, "Accept-Encoding": "gzip" })).headers.etag);
    const observation = { sku: product.sku, name: product.name, competitor: { id: offer.competitor_id, name: offer.competitor_name }, price: `${100 + i}.00`, currency: offer.currency, in_stock: true };
    const res = await fetch(`${worker.directUrl}/admin/observations`, {
      method: "POST",
      headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
      body: JSON.stringify({ observations: [observation] }),
    });
    if (!res.ok) throw new Error(`POST /admin/observations answered ${res.status}: ${await res.text()}`);
    const answered = performance.now();
    for (;;) {
      const now = await timedGet(url, { ...auth, "Accept-Encoding": "gzip", "If-None-Match": before });
      if (now.status === 200) break;
      await sleep(50);
    }
    changes.push(performance.now() - answered);
    await sleep(1500);
  }
  await sleep(500); // the last build's log line
  const reports = buildReports(log);
  const full = reports.find((r) => r.full);
  const incremental = reports.filter((r) => !r.full);
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
  const header = (t: Timed, name: string) => String(t.headers[name] ?? "");
  return {
    products: size,
    fullBuildMs: full?.ms,
    fullBuildServedMs: fullBuildServedMs,
    segments: full?.segmentsWritten,
    identity: { ttfbMs: identity.ttfbMs, totalMs: identity.totalMs, bytes: identity.bytes, encoding: header(identity, "content-encoding") || "identity", work: header(identity, "x-work-counts") },
    gzip: { ttfbMs: gzip.ttfbMs, totalMs: gzip.totalMs, bytes: gzip.bytes, encoding: header(gzip, "content-encoding"), work: header(gzip, "x-work-counts") },
    ndjsonGzip: { totalMs: ndjson.totalMs, bytes: ndjson.bytes },
    concurrentIdentityTotalMs: Math.max(...concurrent.map((t) => t.totalMs)),
    notModified: { status: notModified.status, totalMs: notModified.totalMs, work: header(notModified, "x-work-counts") },
    smallFiltered: { totalMs: small.totalMs, bytes: small.bytes, work: header(small, "x-work-counts") },
    updatedSinceNone: { totalMs: filtered.totalMs, bytes: filtered.bytes, work: header(filtered, "x-work-counts") },
    heapBuildingMb,
    heapServingMb,
    oneProductRebuildMs: incremental.map((r) => r.ms),
    oneProductSegmentsWritten: incremental.map((r) => r.segmentsWritten),
    changeServedMs: changes,
  };
}

const ms = (n: number | undefined) => (n === undefined ? "–" : `${Math.round(n)} ms`);
const mib = (n: number) => `${(n / 2 ** 20).toFixed(2)} MiB`;

function table(results: Awaited<ReturnType<typeof measure>>[]): string {
  const rows: [string, (r: (typeof results)[number]) => string][] = [
    ["full build (builder's log) / until served", (r) => `${ms(r.fullBuildMs)} / ${ms(r.fullBuildServedMs)} (${r.segments} segments)`],
    ["GET /products identity: TTFB / total / bytes", (r) => `${ms(r.identity.ttfbMs)} / ${ms(r.identity.totalMs)} / ${mib(r.identity.bytes)} (${r.identity.encoding})`],
    ["GET /products gzip: TTFB / total / bytes", (r) => `${ms(r.gzip.ttfbMs)} / ${ms(r.gzip.totalMs)} / ${mib(r.gzip.bytes)} (${r.gzip.encoding})`],
    ["NDJSON gzip: total / bytes", (r) => `${ms(r.ndjsonGzip.totalMs)} / ${mib(r.ndjsonGzip.bytes)}`],
    ["4 concurrent identity: slowest total", (r) => ms(r.concurrentIdentityTotalMs)],
    ["X-Work-Counts, unfiltered", (r) => r.gzip.work],
    ["304: status / total / work", (r) => `${r.notModified.status} / ${ms(r.notModified.totalMs)} / ${r.notModified.work}`],
    ["?sku=none (small response): total / work", (r) => `${ms(r.smallFiltered.totalMs)} / ${r.smallFiltered.work}`],
    ["?updated_since=future (all segments skipped): total", (r) => ms(r.updatedSinceNone.totalMs)],
    ["isolate heap peak: building / serving", (r) => `${r.heapBuildingMb.toFixed(1)} MiB / ${r.heapServingMb.toFixed(1)} MiB`],
    ["one-product rebuild (builder's log)", (r) => `${r.oneProductRebuildMs.map(ms).join(", ")} (segments written: ${r.oneProductSegmentsWritten.join(", ")})`],
    ["ingestion answered → change served", (r) => r.changeServedMs.map(ms).join(", ")],
  ];
  const head = `| | ${results.map((r) => `${r.products.toLocaleString("en")} products`).join(" | ")} |\n|---|${results.map(() => "---:").join("|")}|`;
  return [head, ...rows.map(([name, cell]) => `| ${name} | ${results.map(cell).join(" | ")} |`)].join("\n");
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), "price-data-catalogue-bench-"));
  const idp = await startJwks();
  try {
    const config = await freeze(CONFIGS.ours, join(work, "build"));
    const results = [];
    for (const size of sizes) results.push(await measure(size, work, idp, config));
    const text = `# Catalogue snapshot bench (${new Date().toISOString()})\n\n${table(results)}\n`;
    console.log(`\n${text}`);
    mkdirSync(join(ROOT, "bench/results"), { recursive: true });
    writeFileSync(join(ROOT, "bench/results/catalogue.md"), text);
    writeFileSync(join(ROOT, "bench/results/catalogue.json"), `${JSON.stringify(results, null, 2)}\n`);
  } finally {
    idp.server.close();
    await stopAll();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
