/**
 * `npm run bench -- --soak [--seconds N]`: the real worker under sustained load over 10,000 API keys,
 * a share of them driven past their limit, sampled once a second (req/s and p99 from the client;
 * the isolate's heap through the inspector; the workerd process's RSS from /proc). At the end:
 * 0 errors, 0 admitted beyond any limit, memory flat, and 0 lost usage counts. Writes
 * bench/results/soak.md, soak.json and the chart soak.png.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { PLAN_LIMITS } from "../../src/rate-limit/plans.ts";
import type { Bench } from "../harness/bench.ts";
import { isolateHeap } from "../harness/inspector.ts";
import { type BenchKey, makeKeys } from "../harness/keys.ts";
import { ROOT, runLoad, type Worker, workerMemory } from "../harness/processes.ts";
import type { Run } from "../harness/settings.ts";
import { seedState } from "../harness/setup.ts";
import { dataProbe, freezeWorkers, SMALL_PATH, startReady } from "../harness/start.ts";
import type { KeyCounts, SoakJob, SoakKey, SoakLoadResult } from "../load/soak.ts";
import { type Flatness, flatness, percentile } from "../load/soak-checks.ts";
import { nowUtc } from "../report/run-info.ts";
import { chartSvg, writePng } from "../report/soak-chart.ts";

/** The soak's keys: Premium keys kept under their limit, and Free keys pushed past theirs. */
const SOAK_KEYS = { underLimit: 9_980, overLimit: 20 };
/**
 * Every 2nd request goes to an over-limit key. Locally a key's first request (its object's SQLite
 * created, one D1 read) is slow, so the soak starts at a few dozen requests a second; even then each
 * of 20 Free keys (10 a minute) gets about one request every 2 s and is refused within CI's 20 s run.
 * The Premium keys see far fewer than 300 a minute each.
 */
const OVER_LIMIT_EVERY = 2;
/**
 * Soaks this long or longer first use every key once, so the timed phase (and its memory chart) starts
 * with every key's object created. Locally that takes minutes for 10,000 keys (each object's SQLite
 * file is made on its first request), so CI's 20 s soak goes without and its memory grows as it creates them.
 */
const WARMUP_FROM_SECONDS = 120;
const WARMUP_TIMEOUT_SECONDS = 900;
const withWarmup = (seconds: number) => seconds >= WARMUP_FROM_SECONDS;
/** How long a soak of `seconds` may take in all, setup and warm-up included, before the bench's watchdog stops it. */
export const soakBudgetSeconds = (seconds: number) => seconds + 300 + (withWarmup(seconds) ? WARMUP_TIMEOUT_SECONDS : 0);
/** Usage is compared for this many keys of each kind: the account bucket allows 60 logins a minute. */
const USAGE_SAMPLE = 40;

interface MemorySample {
  atMs: number;
  heapMb: number;
  rssMb: number;
}

interface UsageCheck {
  /** failed: the route answered something other than 200 with a usage body. */
  status: "checked" | "failed";
  note: string;
  keys: number;
  mismatches: { id: string; seen: KeyCounts; counted: { admitted: number; refused: number } }[];
}

interface SoakResults {
  startedMs: number;
  settings: { seconds: number; connections: number; underLimitKeys: number; overLimitKeys: number; overLimitEvery: number; path: string };
  load: SoakLoadResult;
  memory: MemorySample[];
  heap: Flatness;
  rss: Flatness;
  usage: UsageCheck;
  errors: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const soakKey = (k: BenchKey, perMinute: number): SoakKey => ({ key: k.key, id: k.id, accountId: k.accountId, perMinute });

async function soak(options: {
  worker: Worker;
  underLimit: BenchKey[];
  overLimit: BenchKey[];
  limits: { underLimit: number; overLimit: number };
  seconds: number;
  connections: number;
  path: string;
  stateDir: string;
  /** An account-login bearer token for an account (the usage route's credential). */
  accountToken: (accountId: string) => Promise<string>;
  step: (message: string) => void;
}): Promise<SoakResults> {
  const job: SoakJob = {
    url: options.worker.directUrl,
    path: options.path,
    connections: options.connections,
    seconds: options.seconds,
    underLimit: options.underLimit.map((k) => soakKey(k, options.limits.underLimit)),
    overLimit: options.overLimit.map((k) => soakKey(k, options.limits.overLimit)),
    overLimitEvery: OVER_LIMIT_EVERY,
    warmup: withWarmup(options.seconds),
  };
  const file = join(options.stateDir, "soak-job.json");
  writeFileSync(file, JSON.stringify(job));
  const startedMs = Date.now();
  let done = false;
  const loading = runLoad<SoakLoadResult>(
    file,
    (options.seconds + 120 + (job.warmup ? WARMUP_TIMEOUT_SECONDS : 0)) * 1000,
    "bench/load/soak.ts",
  ).finally(() => (done = true));
  // Awaited after the sampling; until then a failure must not count as unhandled.
  loading.catch(() => undefined);
  const memory: MemorySample[] = [];
  for (let tick = startedMs; !done; tick += 1000) {
    const heap = await isolateHeap(options.worker);
    memory.push({ atMs: Date.now(), heapMb: heap?.usedMb ?? NaN, rssMb: workerMemory(options.worker)?.rssMb ?? NaN });
    if (memory.length % 30 === 0) options.step(`  soak: ${memory.length} s sampled`);
    await sleep(Math.max(0, tick + 1000 - Date.now()));
  }
  const load = await loading;
  const endedMs = Date.now();
  // The chart and the flatness checks cover the timed phase; the usage check covers the warm-up too.
  const measured = memory.filter((s) => s.atMs >= load.warmupEndedMs);
  const sample = [
    ...sampleOf(job.underLimit.map((k, i) => ({ key: k, seen: load.counts[i]! }))),
    ...sampleOf(job.overLimit.map((k, i) => ({ key: k, seen: load.counts[job.underLimit.length + i]! }))),
  ];
  const usage = await checkUsageCounts(options.worker.directUrl, sample, options.accountToken, startedMs, endedMs);
  const relative = (s: MemorySample, pick: (s: MemorySample) => number) => ({ atMs: s.atMs - load.warmupEndedMs, mb: pick(s) });
  return {
    startedMs: load.warmupEndedMs,
    settings: {
      seconds: options.seconds,
      connections: options.connections,
      underLimitKeys: job.underLimit.length,
      overLimitKeys: job.overLimit.length,
      overLimitEvery: OVER_LIMIT_EVERY,
      path: options.path,
    },
    load,
    memory: measured,
    heap: flatness(measured.map((s) => relative(s, (m) => m.heapMb))),
    rss: flatness(measured.map((s) => relative(s, (m) => m.rssMb))),
    usage,
    errors: load.errors + load.timeouts + load.unexpectedTotal,
  };
}

/** At most USAGE_SAMPLE keys, one per account first (the usage route is limited per account). */
function sampleOf<T extends { key: SoakKey }>(entries: T[]): T[] {
  const byAccount = new Map<string, T[]>();
  for (const entry of entries) byAccount.set(entry.key.accountId, [...(byAccount.get(entry.key.accountId) ?? []), entry]);
  const picked: T[] = [];
  for (let round = 0; picked.length < Math.min(USAGE_SAMPLE, entries.length); round++) {
    for (const list of byAccount.values()) if (list[round] && picked.length < USAGE_SAMPLE) picked.push(list[round]!);
  }
  return picked;
}

const UsageResponse = z.object({
  key_id: z.string(),
  granularity: z.literal("minute"),
  buckets: z.array(z.object({ start: z.string(), admitted: z.number().int(), refused: z.number().int() })),
});

/**
 * "0 lost usage counts": what the client saw of each sampled key (200s admitted, 429s refused)
 * against what the key's own object counted, per minute over the soak (contract: "API key lifecycle"):
 * never less, and no more than the requests still in flight when the load stopped.
 */
async function checkUsageCounts(
  url: string,
  sample: { key: SoakKey; seen: KeyCounts }[],
  accountToken: (accountId: string) => Promise<string>,
  fromMs: number,
  toMs: number,
): Promise<UsageCheck> {
  const from = new Date(Math.floor(fromMs / 60_000) * 60_000).toISOString();
  const to = new Date(Math.ceil(toMs / 60_000) * 60_000 + 60_000).toISOString();
  const mismatches: UsageCheck["mismatches"] = [];
  for (const { key, seen } of sample) {
    const res = await fetch(
      `${url}/api-keys/${key.id}/usage?granularity=minute&from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
      {
        headers: { Authorization: `Bearer ${await accountToken(key.accountId)}` },
        signal: AbortSignal.timeout(20_000),
      },
    );
    const body: unknown = await res.json().catch(() => undefined);
    const usage = UsageResponse.safeParse(body);
    if (res.status !== 200 || !usage.success) {
      return {
        status: "failed",
        note: `GET /api-keys/${key.id}/usage answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`,
        keys: 0,
        mismatches,
      };
    }
    const counted = usage.data.buckets.reduce((sum, b) => ({ admitted: sum.admitted + b.admitted, refused: sum.refused + b.refused }), {
      admitted: 0,
      refused: 0,
    });
    // Lost: the object counted less than the client saw answered. Requests still in flight when the
    // load stopped reached the server unseen, so the object may count up to that many more.
    const inFlight = seen.sent - seen.admitted - seen.refused - seen.other;
    const lost = counted.admitted < seen.admitted || counted.refused < seen.refused;
    const invented = counted.admitted + counted.refused > seen.admitted + seen.refused + inFlight;
    if (lost || invented) mismatches.push({ id: key.id, seen, counted });
  }
  return { status: "checked", note: `${sample.length} keys compared (${from} to ${to}).`, keys: sample.length, mismatches };
}

// ---- Report ---------------------------------------------------------------------------------------

const mib = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "–");
const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");

function soakReport(r: SoakResults, chart: string | undefined): string {
  const l = r.load;
  const rps = l.series.map((s) => s.ok + s.refused);
  const admitted = l.counts.reduce((sum, c) => sum + c.admitted, 0);
  const refused = l.counts.reduce((sum, c) => sum + c.refused, 0);
  const overKeysRefused = l.counts.slice(r.settings.underLimitKeys).filter((c) => c.refused > 0).length;
  const s = r.settings;
  const lines = [
    `### Soak (\`npm run bench -- --soak --seconds ${s.seconds}\`), ${nowUtc(r.startedMs)}`,
    "",
    `The real worker under \`wrangler dev\`, autocannon at ${s.connections} connections for ${s.seconds} s on GET ${s.path}, over ` +
      `${(s.underLimitKeys + s.overLimitKeys).toLocaleString("en")} API keys: ${s.underLimitKeys.toLocaleString("en")} Premium keys (300/min) kept well under their limit, ` +
      `and ${s.overLimitKeys} Free keys (10/min) that 1 request in ${s.overLimitEvery} goes to, so each is pushed past its limit. ` +
      (l.warmupSeconds > 0
        ? `First every key once (${l.warmupSeconds.toFixed(0)} s: each key's object is created on its first request), then the timed phase the chart and the memory checks cover. `
        : `No warm-up (a soak under ${WARMUP_FROM_SECONDS} s): keys' objects are created during the run, which the memory lines show. `) +
      "Sampled once a second: req/s and p99 from the client, the worker isolate's heap in use through the inspector, the RSS of the workerd process that runs it.",
    "",
    ...(chart ? [`![req/s, memory and p99 over the soak](${chart})`, ""] : ["(No chart: Chromium could not render it.)", ""]),
    `Requests: ${l.requests.toLocaleString("en")} (${admitted.toLocaleString("en")} admitted, ${refused.toLocaleString("en")} refused with 429; ${overKeysRefused} of ${s.overLimitKeys} over-limit keys were refused at least once). ` +
      `Responses/s: median ${percentile(rps, 50).toFixed(0)}, lowest ${Math.min(...rps)}, highest ${Math.max(...rps)}; p99 per second: median ${percentile(
        l.series.map((x) => x.p99),
        50,
      ).toFixed(1)} ms, worst ${Math.max(...l.series.map((x) => x.p99)).toFixed(1)} ms.`,
    "",
    "| check | measured | |",
    "|---|---|---|",
    `| 0 errors (failed requests, timeouts, non-2xx other than 429, 429 on a key under its limit) | ${l.errors} errors, ${l.timeouts} timeouts, ${r.errors - l.errors - l.timeouts} unexpected statuses${l.unexpected.length ? ` (${[...new Set(l.unexpected.map((u) => u.status))].join(", ")})` : ""} | ${verdict(r.errors === 0)} |`,
    `| 0 admitted beyond any limit (per key, 200s certainly within one 60 s window ≤ its per-minute limit) | ${l.overAdmitted.length} keys over${
      l.overAdmitted.length
        ? `: ${l.overAdmitted
            .slice(0, 5)
            .map((k) => `${k.id} ${k.most}/${k.perMinute}`)
            .join(", ")}`
        : ""
    } | ${verdict(l.overAdmitted.length === 0)} |`,
    `| isolate heap flat (last third's mean ≤ 1.1 × the first third's) | ${mib(r.heap.firstThirdMb)} → ${mib(r.heap.lastThirdMb)} MiB, slope ${r.heap.slopeMbPerMinute.toFixed(2)} MiB/min | ${verdict(r.heap.flat)} |`,
    `| workerd RSS flat (same test) | ${mib(r.rss.firstThirdMb)} → ${mib(r.rss.lastThirdMb)} MiB, slope ${r.rss.slopeMbPerMinute.toFixed(2)} MiB/min | ${verdict(r.rss.flat)} |`,
    `| 0 lost usage counts (GET /api-keys/:id/usage per key: never below the client's admitted/refused, above only by requests in flight at the stop) | ${r.usage.status === "checked" ? `${r.usage.mismatches.length} of ${r.usage.keys} keys differ; ${r.usage.note}` : `${r.usage.status}: ${r.usage.note}`} | ${verdict(r.usage.status === "checked" && r.usage.mismatches.length === 0)} |`,
    "",
    "The heap is V8's heap in use, which includes garbage not yet collected. Client timestamps bound when the server admitted a request (between sending and the answer), " +
      "so the limit check counts only admissions that certainly fell within one window: it can miss an excess by a few milliseconds of latency, never invent one.",
  ];
  return lines.join("\n");
}

/** The chart (bench/results/soak.png); returns false when it could not be rendered. */
async function soakChart(r: SoakResults, file: string): Promise<boolean> {
  const at = (ms: number) => (ms - r.startedMs) / 1000;
  const svg = chartSvg(
    `Soak: ${(r.settings.underLimitKeys + r.settings.overLimitKeys).toLocaleString("en")} keys, ${r.settings.seconds} s`,
    [
      {
        title: "Responses per second",
        unit: "req/s",
        lines: [
          { label: "200", colour: "#1f77b4", points: r.load.series.map((s) => ({ s: at(s.atMs), y: s.ok })) },
          { label: "429", colour: "#ff7f0e", points: r.load.series.map((s) => ({ s: at(s.atMs), y: s.refused })) },
        ],
      },
      {
        title: "Memory",
        unit: "MiB",
        lines: [
          { label: "workerd RSS", colour: "#2ca02c", points: r.memory.map((m) => ({ s: at(m.atMs), y: m.rssMb })) },
          { label: "isolate heap used", colour: "#9467bd", points: r.memory.map((m) => ({ s: at(m.atMs), y: m.heapMb })) },
        ],
      },
      {
        title: "p99 latency per second",
        unit: "ms",
        lines: [{ label: "p99", colour: "#d62728", points: r.load.series.map((s) => ({ s: at(s.atMs), y: s.p99 })) }],
      },
    ],
    // The last sample lands a little after the load's end: the axis covers it.
    Math.ceil(Math.max(r.settings.seconds, ...r.memory.map((m) => at(m.atMs)), ...r.load.series.map((x) => at(x.atMs)))),
  );
  try {
    await writePng(svg, file);
    return true;
  } catch (error) {
    console.error(`The soak chart could not be rendered: ${error instanceof Error ? error.message : String(error)}`);
    return false;
  }
}

/**
 * `npm run bench -- --soak [--seconds S]`: the real worker alone on 10,000 keys. Correctness decides
 * `failed` (the exit code); memory flatness and throughput are measurements to read.
 */
export async function soakMode(bench: Bench, { settings, soakSeconds }: Run): Promise<{ text: string; failed: boolean }> {
  const { state, step } = bench;
  step(
    `soak: ${soakSeconds} s, ${(SOAK_KEYS.underLimit + SOAK_KEYS.overLimit).toLocaleString("en")} keys, ${settings.connections} connections`,
  );
  const keys = await makeKeys({ load: SOAK_KEYS.underLimit, exact: SOAK_KEYS.overLimit, revoke: 0 });
  const d1 = join(state, "d1");
  const [, { ours }] = await Promise.all([seedState(d1, settings.products, keys.sql), freezeWorkers(bench, ["ours"])]);
  const {
    workers: [worker],
    viaProxy,
  } = await startReady(bench, [{ name: "ours", config: ours, persistTo: d1, vars: await bench.workerVars() }], dataProbe(keys.probe.key));
  step(`ready at ${worker!.directUrl}${viaProxy.length > 0 ? " (through wrangler's proxy)" : ""}; loading for ${soakSeconds} s`);
  const results = await soak({
    worker: worker!,
    underLimit: keys.load,
    overLimit: keys.exact,
    limits: { underLimit: PLAN_LIMITS.premium.per_minute, overLimit: PLAN_LIMITS.free.per_minute },
    seconds: soakSeconds,
    connections: settings.connections,
    path: SMALL_PATH,
    stateDir: state,
    accountToken: (accountId) => bench.token(accountId),
    step,
  });
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  const charted = await soakChart(results, join(ROOT, "bench/results", "soak.png"));
  const text = soakReport(results, charted ? "soak.png" : undefined);
  bench.writeResults({ "soak.md": `${text}\n`, "soak.json": `${JSON.stringify(results, null, 2)}\n` });
  return {
    text,
    failed:
      results.errors > 0 ||
      results.load.overAdmitted.length > 0 ||
      results.usage.mismatches.length > 0 ||
      results.usage.status === "failed",
  };
}
