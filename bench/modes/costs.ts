/**
 * `npm run bench -- --costs [--sizes 10000,100000] [--stream-seconds 60]`: what each operation the model prices
 * (scripts/simulate.ts) costs, read from the worker's own meter, at each catalogue size: the real worker under
 * `wrangler dev` with EXPOSE_WORK_COUNTS and LOG_INVOCATION_WORK on, every invocation's counts (a request's, found by
 * its X-Request-Id; cron runs, queue batches, objects' alarms and their work after an answer, by their kind) from the
 * one line it logs with its final tally, once its body has streamed and its work after the answer has ended
 * (WorkMeter.log, src/platform/metered.ts): X-Work-Counts leaves before a streamed body's work. CPU is the runtime workerd's
 * over the operation (bench/harness/processes.ts workerCpu): the isolate and the local D1 and R2 it emulates, an
 * upper bound of the worker's own. Writes docs/costs.json: each operation's figures at the largest size, and every
 * size's under `by_products`. A stream's minute is its connect spread over its lifetime plus its idle time (streamMinute).
 */
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { COST_FIELDS, type Costs, type OperationCost, type StoredBytes } from "../../scripts/simulate.ts";
import { FLUSH_EVERY_MS, WRITE_EVERY_MS } from "../../src/api-keys/object/last-used-schedule.ts";
import { SEGMENT_TARGET } from "../../src/catalogue/snapshot/limits.ts";
import type { WorkCounts } from "../../src/platform/metered.ts";
import { formatMoney } from "../../src/platform/money.ts";
import { DAY_MS } from "../../src/platform/time.ts";
import { LIFETIME_MS, MAX_STREAMS_PER_KEY } from "../../src/stream/limits.ts";
import type { Bench } from "../harness/bench.ts";
import { makeKeys } from "../harness/keys.ts";
import { findDirectUrl, ROOT, settle, startWorker, stopWorker, type Worker, waitReady, workerCpu, wrangler } from "../harness/processes.ts";
import type { Run } from "../harness/settings.ts";
import { seedState } from "../harness/setup.ts";
import { freezeWorkers, SMALL_PATH } from "../harness/start.ts";
import { median } from "../harness/stats.ts";
import { priceChanges, randomOffers, sandboxKeySql, seedTimeoutMs } from "./catalogue.ts";
import { storedBytes } from "./storage.ts";

type CostsFile = Costs;

type Tally = Omit<
  Required<OperationCost>,
  "per" | "cpu_ms" | "marks_per_flush" | "writes_per_flush" | "marks_per_write" | "per_refused_request" | "steps_per_export"
>;
const noTally = (): Tally => ({
  d1_statements: 0,
  d1_ms: 0,
  d1_ms_alerts: 0,
  d1_untimed: 0,
  d1_rows_read: 0,
  d1_rows_written: 0,
  do_requests: 0,
  do_rows_written: 0,
  r2_class_a: 0,
  r2_class_b: 0,
  queue_messages: 0,
});

const add = (a: Tally, b: Tally, sign = 1): Tally =>
  Object.fromEntries(Object.entries(a).map(([name, value]) => [name, value + sign * b[name as keyof Tally]])) as Tally;

/** An invocation's final tally as logged (WorkMeter.log): a request's carries its request id. */
export type LoggedWork = WorkCounts & { invocation: string; request_id?: string };

const loggedTally = (w: LoggedWork): Tally => ({
  d1_statements: w.d1Statements,
  d1_ms: w.d1Ms,
  d1_ms_alerts: w.alertsD1Ms,
  d1_untimed: w.d1Untimed,
  d1_rows_read: w.d1RowsRead,
  d1_rows_written: w.d1RowsWritten,
  // An alarm is billed as a request to its object: counted with the invocation it starts.
  do_requests: w.keyObjectCalls + w.otherObjectCalls + (ALARMS.has(w.invocation) ? 1 : 0),
  do_rows_written: w.doRowsWritten,
  r2_class_a: w.r2ClassA,
  r2_class_b: w.r2ClassB,
  queue_messages: w.queueSent,
});

/** The worker's log, read from where it was at `from` (a byte offset) on: each invocation's logged tally. */
export function loggedSince(log: string, from: number): LoggedWork[] {
  return readFileSync(log)
    .subarray(from)
    .toString("utf8")
    .split("\n")
    .filter((line) => line.includes('"event":"invocation_work"'))
    .map((line) => JSON.parse(line.slice(line.indexOf("{"))) as LoggedWork);
}

const logSize = (log: string) => readFileSync(log).byteLength;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (n: number) => Math.round(n * 1000) / 1000;

/** An operation's figures: a tally over `count` units (requests, observations, deliveries, minutes) and the CPU they took. */
function perUnit(per: string, tally: Tally, count: number, cpuSeconds: number): OperationCost {
  const scaled = Object.fromEntries(Object.entries(tally).map(([name, value]) => [name, round(value / count)])) as Tally;
  return { per, ...scaled, cpu_ms: round((cpuSeconds * 1000) / count) };
}

interface Context {
  worker: Worker;
  log: string;
  url: string;
}

/** An ingestion through POST /admin/observations, read to its end (its headers kept); anything but a 200 stops the bench. */
async function ingest(ctx: Context, admin: string, observations: readonly unknown[]): Promise<Response> {
  const res = await fetch(`${ctx.url}/admin/observations`, {
    method: "POST",
    headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
    body: JSON.stringify({ observations }),
  });
  if (res.status !== 200) throw new Error(`POST /admin/observations answered ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
  return res;
}

/**
 * `times` requests one after another, each read to its end: their final tallies (each request's log line, by its
 * X-Request-Id) summed, and the runtime's CPU over them.
 */
async function requests(ctx: Context, per: string, times: number, send: () => Promise<Response>, expected = 200): Promise<OperationCost> {
  await settle(ctx.worker, 3000);
  const from = logSize(ctx.log);
  const cpuBefore = workerCpu(ctx.worker).runtime;
  const ids = new Set<string>();
  for (let i = 0; i < times; i++) {
    const res = await send();
    await res.arrayBuffer();
    if (res.status !== expected) throw new Error(`${per}: ${res.url} answered ${res.status}, not ${expected}`);
    ids.add(requestIdOf(res));
  }
  const cpu = workerCpu(ctx.worker).runtime - cpuBefore;
  const ours = (lines: LoggedWork[]) => lines.filter((line) => line.request_id !== undefined && ids.has(line.request_id));
  const lines = ours(await logged(ctx, from, (all) => ours(all).length >= ids.size, { ms: 30_000, idle: false }));
  if (lines.length !== ids.size) throw new Error(`${per}: ${lines.length} of ${ids.size} requests logged their tally`);
  return perUnit(per, sum(lines), times, cpu);
}

function requestIdOf(res: Response): string {
  const id = res.headers.get("X-Request-Id");
  if (!id) throw new Error(`${res.url} answered ${res.status} without X-Request-Id`);
  return id;
}

/** Waits until `done` holds for the log since `from` (at most `ms`), then, unless told, until the worker is idle. */
async function logged(
  ctx: Context,
  from: number,
  done: (lines: LoggedWork[]) => boolean,
  { ms = 60_000, idle = true } = {},
): Promise<LoggedWork[]> {
  const deadline = Date.now() + ms;
  while (!done(loggedSince(ctx.log, from)) && Date.now() < deadline) await sleep(100);
  if (idle) await settle(ctx.worker, 10_000);
  return loggedSince(ctx.log, from);
}

const BUILD_STEP = "catalogue_build_step";
/** A key's periodic work (src/api-keys/object/): invocations of their own, none of them a delivery's. */
const KEY_PERIODIC_WORK = new Set([
  "last_used_mark",
  "last_used_write",
  "last_used_flush",
  "usage_threshold_notice",
  "api_key_object_alarm",
]);
/** The invocations that are an object's alarm (MeteredObject.invocation's kinds): each one an object request. */
/** Requests a key makes before its operations are measured: its next block of admissions covers what is measured. */
const FILL_BLOCK = 40;
/** Keys that each make one request in a few seconds: ten marks a last_used shard (LAST_USED_SHARDS) between two flushes. */
const MARKING_KEYS = 640;

/** Sweep cron runs before the bytes are measured: each archives the history of up to HISTORY_ARCHIVE_PRODUCTS_PER_RUN products. */
const HISTORY_ARCHIVE_RUNS = 6;

const EXPORT_STEP = "export_step";

const ALARMS = new Set([BUILD_STEP, "last_used_flush", "api_key_object_alarm", "webhook_endpoint_alarm", EXPORT_STEP]);

const sum = (lines: readonly LoggedWork[]) => lines.reduce((total, line) => add(total, loggedTally(line)), noTally());

type SandboxList = { products: { offers: { competitor_id: string; currency: string }[] }[] };

/** Every operation at one catalogue size, on a worker of its own. */
async function measureSize(bench: Bench, config: string, vars: Record<string, string>, size: number, streamSeconds: number) {
  const label = `costs, ${size.toLocaleString("en")} products`;
  const keys = await makeKeys({ load: 8 + MARKING_KEYS, exact: 0, revoke: 0 });
  const [admitted, product, listing, stream, mcp, events, managed] = keys.load;
  const marking = keys.load.slice(8);
  const dir = join(bench.state, `costs-${size}`);
  bench.step(`${label}: seeding`);
  const sandbox = await sandboxKeySql(); // test mode's operations (issue 37)
  await seedState(dir, size, keys.sql + sandbox.sql, seedTimeoutMs(size));
  const offers = await randomOffers(dir, 1000);
  const spread = await productsOfDistinctSegments(dir);
  const log = `${dir}.log`;
  const worker = await startWorker({ name: label, config, persistTo: dir, vars, log, logLevel: "log", testScheduled: true });
  let stopped = false;
  try {
    await waitReady(worker, (url) => fetch(url), 120_000);
    await findDirectUrl(worker, async (url) => (await fetch(`${url}/openapi.json`, { signal: AbortSignal.timeout(2000) })).ok);
    const ctx: Context = { worker, log, url: worker.directUrl };
    const get = (path: string, key: string, headers: Record<string, string> = {}) =>
      fetch(`${ctx.url}${path}`, { headers: { Authorization: `Bearer ${key}`, ...headers } });
    const send = (method: string, path: string, token: string, body: unknown) =>
      fetch(`${ctx.url}${path}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
        body: JSON.stringify(body),
      });
    bench.step(`${label}: the first snapshot`);
    for (let res = await get("/products", listing!.key); res.status !== 200; res = await get("/products", listing!.key)) {
      await res.arrayBuffer();
      if (res.status !== 503) throw new Error(`GET /products answered ${res.status}`);
      await sleep(500);
    }
    const costs: Record<string, OperationCost> = {};
    // Each key's object writes a row for each block of admissions it opens, sized by the key's last minute
    // (src/api-keys/object/reservations.ts): a key asked a few times opens blocks of 1, 2, 4, … and writes a row every
    // few requests. The model prices those rows at the model's own rate (scripts/simulate.ts, KEY_ADMISSIONS), and
    // counts the rest of an operation's object rows as measured: so every key is first used FILL_BLOCK times, right
    // before its operations are measured, and each operation's rows are its own, not a young key's blocks.
    const fillBlock = async (key: string) => {
      for (let i = 0; i < FILL_BLOCK; i++) await (await get(SMALL_PATH, key)).arrayBuffer();
    };
    bench.step(`${label}: requests`);
    await fillBlock(admitted!.key);
    costs.data_request_admitted = await requests(ctx, "request", 40, () => get(SMALL_PATH, admitted!.key));
    let refusals = 20;
    for (let i = 0; i < 12; i++) {
      const res = await get(SMALL_PATH, keys.overLimit.key); // past its 10 a minute
      await res.arrayBuffer();
      if (res.status === 429) refusals++;
    }
    costs.data_request_refused = await requests(ctx, "request", 20, () => get(SMALL_PATH, keys.overLimit.key), 429);
    const gzip = { "Accept-Encoding": "gzip" };
    await fillBlock(listing!.key);
    costs.list_products_gzip = await requests(ctx, "request", 3, () => get("/products", listing!.key, gzip));
    costs.list_products_filtered_1pct = await requests(ctx, "request", 3, () => get("/products?category=drones", listing!.key, gzip));
    // A large catalogue's whole list in a currency asked for the first time is a 503 while the builder converts it in
    // its own steps (src/key-data/live.ts): the responses measured are those once it is served.
    for (
      let res = await get("/products?currency=EUR", listing!.key, gzip);
      res.status !== 200;
      res = await get("/products?currency=EUR", listing!.key, gzip)
    ) {
      await res.arrayBuffer();
      if (res.status !== 503) throw new Error(`GET /products?currency=EUR answered ${res.status}`);
      await sleep(2000);
    }
    await fillBlock(listing!.key);
    costs.list_products_converted = await requests(ctx, "request", 3, () => get("/products?currency=EUR", listing!.key, gzip));
    const found = (await (await get(`/products?sku=${encodeURIComponent(offers[0]!.sku)}`, product!.key)).json()) as {
      products: { id: string }[];
    };
    const productId = found.products[0]!.id;
    // One product from each of distinct segments, none asked for before: each read is its segment's first in this
    // isolate (the cold path, which the model prices), half for GET /products/{id} and half for the MCP tool.
    const half = Math.min(10, Math.floor(spread.length / 2));
    const [byRoute, byTool] = [spread.slice(0, half), spread.slice(half, 2 * half)];
    let asked = 0;
    await fillBlock(product!.key);
    costs.get_product = await requests(ctx, "request", half, () => get(`/products/${byRoute[asked++]!}`, product!.key));
    costs.product_history = await requests(ctx, "request", 20, () => get(`/products/${productId}/history`, product!.key));
    const account = await bench.token(managed!.accountId);
    costs.key_management_request = await requests(ctx, "request", 10, () =>
      send("PATCH", `/api-keys/${managed!.id}`, account, { name: `renamed ${Date.now()}` }),
    );
    let called = 0;
    const mcpCall = () => ({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "get_product", arguments: { id: byTool[called++]! } },
    });
    await fillBlock(mcp!.key);
    costs.mcp_tool_call = await requests(ctx, "request", half, () => send("POST", "/mcp", mcp!.key, mcpCall()));
    await fillBlock(sandbox.key);
    costs.test_list_products_gzip = await requests(ctx, "request", 3, () => get("/products", sandbox.key, gzip));
    const [sandboxOffer] = ((await (await get("/products?sku=TEST-CF-0001", sandbox.key)).json()) as SandboxList).products[0]!.offers;
    let sandboxChanges = 0;
    const sandboxChange = { sku: "TEST-CF-0001", name: "x", competitor: { id: sandboxOffer!.competitor_id, name: "x" }, in_stock: true };
    costs.test_observations = await requests(ctx, "request", 5, () =>
      send("POST", "/test/observations", sandbox.key, {
        observations: [
          { ...sandboxChange, currency: sandboxOffer!.currency, price: formatMoney(1000 + 10 * ++sandboxChanges, sandboxOffer!.currency) },
        ],
      }),
    );

    bench.step(`${label}: 1,000 scattered observations, the build steps they start`);
    const admin = await bench.token("bench-admin", "prices:write");
    const observations = priceChanges(offers, 1);
    await settle(worker, 3000);
    let from = logSize(log);
    let cpuBefore = workerCpu(worker).runtime;
    const ingested = await ingest(ctx, admin, observations);
    // The request's final tally, its work after the answer (the first deliveries of its events) included; the
    // builder's steps wait COALESCE_MS after its poke, so they are not in its CPU.
    const ingestionId = requestIdOf(ingested);
    const isIngestion = (line: LoggedWork) => line.request_id === ingestionId;
    const ingestion = (await logged(ctx, from, (lines) => lines.some(isIngestion), { ms: 30_000, idle: false })).filter(isIngestion);
    if (ingestion.length !== 1) throw new Error(`the ingestion logged its tally ${ingestion.length} times, not once`);
    const cpuIngested = workerCpu(worker).runtime;
    costs.ingest_1000_scattered = perUnit("observation", sum(ingestion), observations.length, cpuIngested - cpuBefore);
    const steps = (await logged(ctx, from, () => false, { ms: 10_000 })).filter((line) => line.invocation === BUILD_STEP);
    // Steps as the build writes them: CPU over the window they ran in, per step.
    costs.catalogue_build_step = perUnit("alarm step", sum(steps), Math.max(1, steps.length), workerCpu(worker).runtime - cpuIngested);
    const buildSteps = steps.length;

    await fillBlock(events!.key);
    costs.events_page = await requests(ctx, "request", 10, () => get("/events?limit=100", events!.key));

    bench.step(`${label}: webhook deliveries`);
    costs.webhook_delivery = await webhookDeliveries(
      ctx,
      bench,
      managed!.accountId,
      admin,
      priceChanges(offers, 2).slice(0, DELIVERY_EVENTS),
    );

    bench.step(`${label}: a failing endpoint's object and its alarms`);
    costs.webhook_endpoint_alarm = await endpointAlarms(
      ctx,
      bench,
      managed!.accountId,
      admin,
      priceChanges(offers, 3).slice(0, DELIVERY_EVENTS),
    );

    bench.step(`${label}: cron runs`);
    await settle(worker, 3000);
    from = logSize(log);
    cpuBefore = workerCpu(worker).runtime;
    for (const cron of ["* * * * *", "*/1 * * * *"])
      await (await fetch(`${worker.url}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent(cron)}`)).text();
    const crons = (await logged(ctx, from, (lines) => lines.filter((line) => line.invocation.startsWith("cron_")).length >= 2)).filter(
      (line) => line.invocation.startsWith("cron_"),
    );
    costs.cron_run = perUnit("minute (both crons)", sum(crons), 1, workerCpu(worker).runtime - cpuBefore);

    // An export's steps (docs/exports.md), each an alarm of its runner: the whole catalogue, then the feed's changes of
    // the last 29 days. The seed writes no events above 1,000 products, so those are this run's (about 1,300: one step,
    // of the 5,000 events a step may read); the history phase, before the feed's floor, is not read.
    bench.step(`${label}: a catalogue export and a changes export (Parquet, our bucket), step by step`);
    const exporter = await bench.token(managed!.accountId);
    costs.catalogue_export_step = await exportSteps(ctx, exporter, { kind: "catalogue", format: "parquet" });
    costs.changes_export_step = await exportSteps(ctx, exporter, {
      kind: "changes",
      format: "parquet",
      since: new Date(Date.now() - 29 * DAY_MS).toISOString(),
    });

    bench.step(
      `${label}: ${STREAMS_HELD} idle streams for ${CONNECT_SECONDS} s, no stream for ${streamSeconds} s, ${STREAMS_HELD} for ${streamSeconds} s`,
    );
    for (let i = 0; i < 3; i++) await (await get(SMALL_PATH, stream!.key)).arrayBuffer(); // wakes the key's object
    // The held streams' idle CPU is a median slice of their window less a quiet window's (streamMinute): the last_used
    // shards' flushes of the marks made so far (FLUSH_EVERY_MS after a shard's first stored row) run before both.
    await sleep(WRITE_EVERY_MS + FLUSH_EVERY_MS + 3000);
    costs.stream_connection_minute = await streamMinute(ctx, stream!.key, streamSeconds);

    // Many keys' first uses within one flush interval, as a shard sees them at the model's load (hundreds of marks
    // between two flushes): the first mark after a flush arms the shard's alarm (a row), the others only add theirs.
    bench.step(`${label}: ${MARKING_KEYS} keys' last_used marks`);
    await Promise.all(
      marking.map(async (key, i) => {
        await sleep((i * 2000) / MARKING_KEYS);
        await (await get(SMALL_PATH, key.key)).arrayBuffer();
      }),
    );

    // A key's periodic work and the objects' alarms, over the whole run (their own invocations, each logged by its
    // kind): a key's last_used mark, its shard's flush to D1, a key's alarm (the refusals its answers left unwritten).
    // Their CPU runs beside the requests' and is not told apart: 0 here, what the model cannot price.
    await settle(worker, 3000);
    const all = loggedSince(log, 0);
    const ofKind = (kind: string) => all.filter((line) => line.invocation === kind);
    const marks = ofKind("last_used_mark");
    const writes = ofKind("last_used_write");
    const flushes = ofKind("last_used_flush");
    const keyAlarms = ofKind("api_key_object_alarm");
    costs.key_last_used_mark = perUnit("mark (a key in use, every MARK_EVERY_MS)", sum(marks), Math.max(1, marks.length), 0);
    costs.last_used_write = {
      ...perUnit("write (a shard's gathered marks, at most one a WRITE_EVERY_MS)", sum(writes), Math.max(1, writes.length), 0),
      marks_per_write: round(marks.length / Math.max(1, writes.length)),
    };
    costs.last_used_flush = {
      ...perUnit("flush (a shard's alarm)", sum(flushes), Math.max(1, flushes.length), 0),
      marks_per_flush: round(marks.length / Math.max(1, flushes.length)),
      writes_per_flush: round(writes.length / Math.max(1, flushes.length)),
    };
    costs.key_object_alarm = {
      ...perUnit("alarm (a key's refusals left unwritten)", sum(keyAlarms), Math.max(1, keyAlarms.length), 0),
      per_refused_request: round(keyAlarms.length / refusals),
    };
    // The alert windows' day rows, for their bytes: the seeded history is days to months old, so each sweep cron's
    // history archive (src/catalogue/history-archive.ts, the real code path) moves its oldest products' rows into their
    // offers' days (random product ids, every competitor and currency, a month of days) and folds the days past
    // OFFER_DAYS_KEPT_MS into far rows. The one run above moved a few hundred products; these move thousands more.
    bench.step(`${label}: ${HISTORY_ARCHIVE_RUNS} history archive runs (the alert windows' day rows)`);
    for (let run = 0; run < HISTORY_ARCHIVE_RUNS; run++)
      await (await fetch(`${worker.url}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("* * * * *")}`)).text();
    await settle(worker, 3000);
    await stopWorker(worker);
    stopped = true;
    bench.step(`${label}: bytes stored per row`);
    return { costs, buildSteps, storage: storedBytes(dir, size) };
  } finally {
    if (!stopped) await stopWorker(worker);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** How long an export may take to succeed (a catalogue of 100,000 products: about 20 steps). */
const EXPORT_TIMEOUT_MS = 600_000;

/**
 * One export, POST /exports until GET /exports/{id} says it has succeeded: its steps' final tallies (ExportRunner's
 * alarms, "export_step", each an object request) per step, and how many steps it took. CPU is the runtime's over the
 * whole export, its POST and its GET /exports/{id} every 2 s included (their few milliseconds): an upper bound.
 */
async function exportSteps(ctx: Context, account: string, body: Record<string, unknown>): Promise<OperationCost> {
  const auth = { Authorization: `Bearer ${account}` };
  await settle(ctx.worker, 3000);
  const from = logSize(ctx.log);
  const cpuBefore = workerCpu(ctx.worker).runtime;
  const res = await fetch(`${ctx.url}/exports`, {
    method: "POST",
    headers: { ...auth, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 202) throw new Error(`POST /exports ${body.kind} answered ${res.status}: ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  const deadline = Date.now() + EXPORT_TIMEOUT_MS;
  for (let status = "running"; status !== "succeeded"; ) {
    if (Date.now() > deadline) throw new Error(`the ${body.kind} export ${id} was still ${status} after ${EXPORT_TIMEOUT_MS / 1000} s`);
    await sleep(2000);
    const row = (await (await fetch(`${ctx.url}/exports/${id}`, { headers: auth })).json()) as { status: string; error: string | null };
    if (row.status === "failed") throw new Error(`the ${body.kind} export ${id} failed: ${row.error}`);
    status = row.status;
  }
  const cpu = workerCpu(ctx.worker).runtime - cpuBefore;
  // The last step logs its tally after it has set the row's status: wait for the worker to be idle.
  const steps = (await logged(ctx, from, () => true, { ms: 0 })).filter((line) => line.invocation === EXPORT_STEP);
  if (steps.length === 0) throw new Error(`the ${body.kind} export ${id} logged no step`);
  return { ...perUnit("alarm step", sum(steps), steps.length, cpu), steps_per_export: steps.length };
}

/**
 * An endpoint that fails every delivery: its webhook's failing_since set by its first failed batch, its later
 * deliveries are handed to its own object (src/webhooks/delivery/endpoint.ts), whose alarm probes it. Each such
 * alarm's final tally (the alarm itself an object request), over FAILING_SECONDS; the webhook deleted after.
 */
async function endpointAlarms(ctx: Context, bench: Bench, accountId: string, admin: string, changed: readonly unknown[]) {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const account = await bench.token(accountId);
  const { port } = server.address() as AddressInfo;
  const hook = await fetch(`${ctx.url}/webhooks`, {
    method: "POST",
    headers: { Authorization: `Bearer ${account}`, "Content-Type": "application/json" },
    body: JSON.stringify({ url: `http://127.0.0.1:${port}/failing`, events: ["price.changed"] }),
  });
  if (hook.status !== 201) throw new Error(`POST /webhooks answered ${hook.status}: ${await hook.text()}`);
  const { id } = (await hook.json()) as { id: string };
  try {
    await settle(ctx.worker, 3000);
    const from = logSize(ctx.log);
    await ingest(ctx, admin, changed);
    await sleep(FAILING_SECONDS * 1000);
    const alarms = loggedSince(ctx.log, from).filter((line) => line.invocation === "webhook_endpoint_alarm");
    return perUnit("alarm (a failing endpoint's object)", sum(alarms), Math.max(1, alarms.length), 0);
  } finally {
    await (await fetch(`${ctx.url}/webhooks/${id}`, { method: "DELETE", headers: { Authorization: `Bearer ${account}` } })).arrayBuffer();
    server.close();
  }
}

/** How long the failing endpoint's alarms are watched. */
const FAILING_SECONDS = 30;

/**
 * Webhooks that each want every price change of the deliveries' ingestion: as many as an account may have
 * (MAX_WEBHOOKS_PER_ACCOUNT in src/webhooks/service.ts, 20: beyond it POST /webhooks answers 409) less the failing
 * endpoint's (endpointAlarms). A fan-out's work is per event (its claim and mark in the outbox, its batch) and
 * is counted per delivery, so the fewer deliveries an event makes here the more of it each carries: at 4 webhooks it
 * was ~0.5 of a delivery's 3.5 D1 rows written. The model's workload makes ~100 deliveries an event; 19 is the most
 * one account gets, so what is left of it still overstates a delivery's share.
 */
const DELIVERY_WEBHOOKS = 19;
/** Price changes in that ingestion: above MAX_IMMEDIATE_EVENTS (src/webhooks/delivery/immediate.ts), as the model's are. */
const DELIVERY_EVENTS = 150;

/**
 * Deliveries as the model's workload makes them: an ingestion of more changes than the first-delivery path takes, so
 * its events go through the queue (fan-out batches, then delivery batches of wrangler.toml's size), to
 * DELIVERY_WEBHOOKS webhooks of one account whose receiver answers at once. Every invocation's work after the
 * ingestion's answer (fan-out, queue batches), per delivery received.
 */
async function webhookDeliveries(
  ctx: Context,
  bench: Bench,
  accountId: string,
  admin: string,
  changed: readonly unknown[],
): Promise<OperationCost> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const account = await bench.token(accountId);
    const { port } = server.address() as AddressInfo;
    for (let i = 0; i < DELIVERY_WEBHOOKS; i++) {
      const hook = await fetch(`${ctx.url}/webhooks`, {
        method: "POST",
        headers: { Authorization: `Bearer ${account}`, "Content-Type": "application/json" },
        body: JSON.stringify({ url: `http://127.0.0.1:${port}/hook/${i}`, events: ["price.changed"] }),
      });
      if (hook.status !== 201) throw new Error(`POST /webhooks answered ${hook.status}: ${await hook.text()}`);
    }
    await settle(ctx.worker, 3000);
    const from = logSize(ctx.log);
    const cpuBefore = workerCpu(ctx.worker).runtime;
    await ingest(ctx, admin, changed);
    const expected = changed.length * DELIVERY_WEBHOOKS;
    const deadline = Date.now() + 240_000;
    while (received < expected && Date.now() < deadline) await sleep(250);
    if (received < expected) throw new Error(`${received} of ${expected} deliveries received in 240 s`);
    // The ingestion's own work (its answer, its publish to the stream hubs after it) is ingest_1000_scattered's, the
    // catalogue build the changes start is catalogue_build_step's, and a key's periodic work is its own: their tallies
    // are left out (their CPU, in this window, is not told apart).
    const lines = (await logged(ctx, from, () => true, { ms: 0 })).filter(
      (line) =>
        line.invocation !== BUILD_STEP &&
        !KEY_PERIODIC_WORK.has(line.invocation) &&
        !line.invocation.startsWith("POST /admin/observations"),
    );
    return perUnit("delivery", sum(lines), received, workerCpu(ctx.worker).runtime - cpuBefore);
  } finally {
    server.close();
  }
}

/**
 * The process's CPU seconds in each SLICE_SECONDS slice of `seconds`, sampled one after another: what runs beside a
 * window (an object's alarm, a flush, the runtime's own work) lands in a few slices, so their median leaves it out.
 */
async function cpuSlices(ctx: Context, seconds: number): Promise<number[]> {
  const slices: number[] = [];
  let before = workerCpu(ctx.worker).runtime;
  for (let i = 0; i < Math.floor(seconds / SLICE_SECONDS); i++) {
    await sleep(SLICE_SECONDS * 1000);
    const now = workerCpu(ctx.worker).runtime;
    slices.push(now - before);
    before = now;
  }
  return slices;
}

/**
 * STREAMS_HELD streams of one key open for CONNECT_SECONDS and then `idleSeconds` with nothing to send: their final
 * tallies (each logged once, when it ends), the process's CPU over the connect, and its CPU in each idle slice.
 */
async function idleStreamsFor(
  ctx: Context,
  key: string,
  idleSeconds: number,
): Promise<{ tally: Tally; connectCpuSeconds: number; idleSlices: number[] }> {
  await settle(ctx.worker, 3000);
  const from = logSize(ctx.log);
  const cpuBefore = workerCpu(ctx.worker).runtime;
  const abort = new AbortController();
  const opened = await Promise.all(
    Array.from({ length: STREAMS_HELD }, async () => {
      const res = await fetch(`${ctx.url}/events/stream?type=price.changed`, {
        headers: { Authorization: `Bearer ${key}` },
        signal: abort.signal,
      });
      if (res.status !== 200 || !res.body) throw new Error(`GET /events/stream answered ${res.status}`);
      const reading = (async () => {
        for await (const _ of res.body as unknown as AsyncIterable<Uint8Array>);
      })().catch(() => {});
      return { id: requestIdOf(res), reading };
    }),
  );
  await sleep(CONNECT_SECONDS * 1000);
  const connectCpuSeconds = workerCpu(ctx.worker).runtime - cpuBefore;
  const idleSlices = await cpuSlices(ctx, idleSeconds);
  abort.abort();
  await Promise.all(opened.map(({ reading }) => reading));
  const ids = new Set(opened.map(({ id }) => id));
  const ours = (lines: LoggedWork[]) => lines.filter((line) => line.request_id !== undefined && ids.has(line.request_id));
  const lines = ours(await logged(ctx, from, (all) => ours(all).length >= ids.size, { ms: 20_000 }));
  if (lines.length !== ids.size) throw new Error(`${ids.size} streams logged ${lines.length} tallies, not one each`);
  return { tally: sum(lines), connectCpuSeconds, idleSlices };
}

/** How long the streams' connect is given before their idle time is sampled. */
const CONNECT_SECONDS = 2;
/** Streams held at once (a key's most), so a stream's own idle CPU stands out of the process's. */
const STREAMS_HELD = MAX_STREAMS_PER_KEY;
/** The idle windows are sampled in slices this long. */
const SLICE_SECONDS = 5;

/**
 * A stream-minute over a stream's whole life (LIFETIME_MS, after which its client reconnects): one connect and its
 * idle rest. The connect is the process's CPU over the streams' first CONNECT_SECONDS; the idle rate is the median
 * slice of the held streams' idle window less the median slice of an equal window with no stream open (what runs
 * beside them, as an export's or a build's alarm, was scaled to a stream's lifetime as its own when the window was
 * taken whole: 380 ms a stream-minute at 100,000 products in one run, 2.8 at 10,000). A stream's close (its hub's
 * release, its tally's log line) is in neither. Object requests and rows: the streams held `seconds` over those held
 * only for their connect, scaled to the lifetime.
 */
async function streamMinute(ctx: Context, key: string, seconds: number): Promise<OperationCost> {
  const connect = await idleStreamsFor(ctx, key, 0);
  const quiet = median(await cpuSlices(ctx, seconds)) / SLICE_SECONDS;
  const held = await idleStreamsFor(ctx, key, seconds);
  const idleCpuPerSecond = Math.max(0, median(held.idleSlices) / SLICE_SECONDS - quiet);
  const idleSeconds = LIFETIME_MS / 1000 - CONNECT_SECONDS;
  const idleShare = idleSeconds / seconds;
  const lifetime = add(
    connect.tally,
    Object.fromEntries(
      Object.entries(add(held.tally, connect.tally, -1)).map(([name, value]) => [name, Math.max(0, value) * idleShare]),
    ) as Tally,
  );
  const cpuSeconds = connect.connectCpuSeconds + idleCpuPerSecond * idleSeconds;
  return perUnit("minute", lifetime, (STREAMS_HELD * LIFETIME_MS) / 60_000, cpuSeconds);
}

/**
 * A product from the middle of each segment of the seeded catalogue's snapshot (a full build: SEGMENT_TARGET products
 * a segment, in id order), so no two share a segment.
 */
async function productsOfDistinctSegments(dir: string): Promise<string[]> {
  const query =
    "SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM products) " +
    `WHERE n % ${SEGMENT_TARGET} = ${SEGMENT_TARGET / 2} ORDER BY n LIMIT 20`;
  const out = await wrangler(["d1", "execute", "DB", "--local", "--persist-to", dir, "--json", "--command", query], 120_000);
  return (JSON.parse(out.slice(out.indexOf("["))) as { results: { id: string }[] }[])[0]!.results.map((row) => row.id);
}

/** Seeding and serving each size, its stream's minute, its two exports (about 35 s at 100,000 products), and room for the rest. */
export const costsBudgetSeconds = ({ settings }: Run) =>
  settings.costSizes.reduce((total, size) => total + seedTimeoutMs(size) / 1000 + 2 * settings.streamSeconds + 240 + 120, 60);

const commitOf = () => execFileSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();

export async function costsMode(bench: Bench, { settings }: Run): Promise<string> {
  const { ours } = await freezeWorkers(bench, ["ours"]);
  const vars = await bench.workerVars({ EXPOSE_WORK_COUNTS: "true", LOG_INVOCATION_WORK: "true", WEBHOOK_ALLOW_INSECURE_URLS: "true" });
  const bySize: Record<string, Record<string, OperationCost>> = {};
  const stepsBySize: Record<string, number> = {};
  const storageBySize: Record<string, StoredBytes> = {};
  for (const size of settings.costSizes) {
    const measured = await measureSize(bench, ours, vars, size, settings.streamSeconds);
    bySize[size] = measured.costs;
    stepsBySize[size] = measured.buildSteps;
    storageBySize[size] = measured.storage;
  }
  const largest = bySize[Math.max(...settings.costSizes)]!;
  const operations = Object.fromEntries(
    Object.entries(largest).map(([name, cost]) => [
      name,
      { ...cost, by_products: Object.fromEntries(settings.costSizes.map((size) => [String(size), bySize[size]![name]!])) },
    ]),
  ) as CostsFile["operations"];
  // How many alarm steps the build of one ingestion of 1,000 scattered observations took, at each size (the model
  // extrapolates them to its catalogue, as it does the figures).
  const largestSize = String(Math.max(...settings.costSizes));
  operations.catalogue_build_step!.steps_per_ingestion = stepsBySize[largestSize]!;
  operations.catalogue_build_step!.steps_by_products = stepsBySize;
  const file: CostsFile = {
    commit: commitOf(),
    measured_at: new Date().toISOString(),
    products: settings.costSizes,
    operations,
    storage: { ...storageBySize[largestSize]!, by_products: storageBySize },
  };
  const costsPath = join(ROOT, "docs/costs.json");
  writeFileSync(costsPath, `${JSON.stringify(file, null, 2)}\n`);
  // As the repository's formatter writes it (short arrays on one line), so `npm run lint` still passes after a run.
  execFileSync(join(ROOT, "node_modules/.bin/biome"), ["format", "--write", costsPath], { stdio: "ignore" });
  bench.step("written to docs/costs.json");
  return costsReport(file);
}

/** The figures as a table: each operation at each size. */
function costsReport(file: CostsFile): string {
  const rows = Object.entries(file.operations).flatMap(([name, op]) =>
    file.products.map((size) => {
      const cost = op.by_products[String(size)]!;
      return `| ${name} | ${size.toLocaleString("en")} | ${cost.per} | ${COST_FIELDS.map((field) => cost[field]).join(" | ")} |`;
    }),
  );
  return [
    `**Costs** (docs/costs.json, commit ${file.commit.slice(0, 12)}):`,
    "",
    `| operation | products | per | ${COST_FIELDS.join(" | ")} |`,
    `|---|---:|---|${COST_FIELDS.map(() => "---:").join("|")}|`,
    ...rows,
  ].join("\n");
}
