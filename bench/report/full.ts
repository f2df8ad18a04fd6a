/** The report of `npm run bench`: one Markdown text for the console, bench/results/latest.md and (a full run) docs/benchmark.md. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Memory, ROOT } from "../harness/processes.ts";
import type { HotFunction } from "../harness/profile.ts";
import { LOAD_ORDER, LOADED, type WorkerName } from "../harness/workers.ts";
import type { Measured } from "../load/measured.ts";
import { CATALOGUE_NOTES, type CatalogueResult, catalogueReport } from "../modes/catalogue.ts";
import type { Exactness, Revocation, WorkCount, WorkReport } from "../modes/probes.ts";
import { type WebhookLatency, webhookLatencyReport } from "../modes/webhook-latency.ts";
import { nowUtc } from "./run-info.ts";

export interface Results {
  mode: "quick" | "full";
  /** Workers whose runtime socket was not found, so they were loaded through wrangler's proxy. */
  viaProxy: string[];
  settings: {
    loadKeys: number;
    connections: number;
    loadSeconds: number;
    rounds: number;
    products: number;
    catalogueProducts: number;
    warmupSeconds: number;
  };
  machine: { cores: number; model: string; memoryGb: number; node: string };
  loads: Record<"full" | "small", Record<WorkerName, Measured[]>>;
  exact: Record<WorkerName, Exactness>;
  revocations: Revocation[];
  work: WorkReport;
  catalogue: { products: number; bytes: number; status304: number; bytes304: number; full: Measured; notModified: Measured };
  memory: Record<WorkerName | "catalogue", Memory | undefined>;
  /** Where the isolate's CPU went during a small-response load, for ours and the floor that writes. */
  profiles: Record<"ours" | "floor-write", HotFunction[]>;
  webhooks: WebhookLatency;
  /** The catalogue snapshot at each size, on workers of their own (bench/modes/catalogue.ts). */
  catalogueSizes: CatalogueResult[];
  seconds: number;
}

interface Summary {
  rps: number;
  p50: number;
  p99: number;
  bytes: number;
  workerCpuMs: number;
  loadCpuMs: number;
  non2xx: number;
  errors: number;
}

/**
 * Over the rounds, the median of each figure (with two rounds, their mean): a round that another
 * process on the machine disturbed does not move the result. Failures are summed.
 */
function summarise(results: readonly Measured[]): Summary {
  const median = (pick: (r: Measured) => number) => {
    const values = results.map(pick).sort((a, b) => a - b);
    const mid = Math.floor(values.length / 2);
    return values.length % 2 ? values[mid]! : (values[mid - 1]! + values[mid]!) / 2;
  };
  const sum = (pick: (r: Measured) => number) => results.reduce((total, r) => total + pick(r), 0);
  return {
    rps: median((r) => r.rps),
    p50: median((r) => r.p50),
    p99: median((r) => r.p99),
    bytes: median((r) => r.bytesPerResponse),
    workerCpuMs: median((r) => r.workerCpuMs),
    loadCpuMs: median((r) => r.loadCpuMs),
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors + r.timeouts),
  };
}

const int = (n: number) => Math.round(n).toLocaleString("en");
const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
const ratio = (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)}×` : "–");
const kb = (bytes: number) => (bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(2)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`);
const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
const signedMs = (n: number) => `${n >= 0 ? "+" : "−"}${Math.abs(n).toFixed(2)}`;
const workText = (w: WorkCount) => `d1=${w.d1}, key-do=${w.keyDo}, other-do=${w.otherDo} (HTTP ${w.status})`;
const statuses = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([code, n]) => `${n}× ${code}`)
    .join(", ") || "none";

function versions() {
  const version = (pkg: string) =>
    (JSON.parse(readFileSync(join(ROOT, "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version;
  return `wrangler ${version("wrangler")}, autocannon ${version("autocannon")}, hono-rate-limiter ${version("hono-rate-limiter")}, @hono-rate-limiter/cloudflare ${version("@hono-rate-limiter/cloudflare")}`;
}

export function report(r: Results): string {
  const full = Object.fromEntries(LOADED.map((name) => [name, summarise(r.loads.full[name])])) as Record<WorkerName, Summary>;
  const small = Object.fromEntries(LOADED.map((name) => [name, summarise(r.loads.small[name])])) as Record<WorkerName, Summary>;
  const s = r.settings;
  const lines: string[] = [];
  const push = (...more: string[]) => lines.push(...more);

  push(
    `### Benchmark (${r.mode === "quick" ? "`npm run bench -- --quick`: a smoke run, numbers are rough" : "`npm run bench`"}), ${nowUtc()}`,
    "",
    `Machine: ${r.machine.cores} cores (${r.machine.model}), ${r.machine.memoryGb} GB; Node ${r.machine.node}; ${versions()}. ` +
      `Load generator and workerd share these cores, so compare ratios within one run, not absolute numbers across runs.`,
    "",
    `Load: autocannon in a process of its own, ${s.connections} connections, ${s.loadSeconds} s per worker and request, ${s.rounds} round(s) ` +
      `(${LOAD_ORDER.join(", ")} in turn, every other round in reverse, each doing both requests), API keys round robin over ${int(s.loadKeys)} Premium keys (each stays well under 300/min). ` +
      `Right before each load, every key was used once on the worker (workerd evicts a Durable Object after ~10 s idle; the loads measure warm keys) ` +
      "and the bench waited (at most 5 s) until the worker was idle, so what that set off in the background (the real worker's `last_used_at` " +
      "marks, handed to their shards) is not charged to the loads; " +
      `in the first round each worker also had ${s.warmupSeconds} s of GET /products. ` +
      "Each worker is a bundle built once at the start, run by `wrangler dev` with its own copy of one seeded local D1; the load goes to the socket of the " +
      "workerd that runs it, not through wrangler's development proxy (which funnels every request through one Durable Object and is not there in production).",
    "",
    "| request | worker | req/s | p50 ms | p99 ms | ours ÷ this, req/s | ours ÷ this, p99 | worker CPU ms/request | ours − this, CPU ms |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
  );
  const rows = (label: string, table: Record<WorkerName, Summary>) => {
    for (const name of LOADED) {
      const t = table[name];
      const mine = name === "ours";
      push(
        `| ${label} | ${mine ? "**ours**" : name} | ${int(t.rps)} | ${ms(t.p50)} | ${ms(t.p99)} | ${mine ? "–" : ratio(table.ours.rps / t.rps)} | ${mine ? "–" : ratio(table.ours.p99 / t.p99)} | ${t.workerCpuMs.toFixed(2)} | ${mine ? "–" : signedMs(table.ours.workerCpuMs - t.workerCpuMs)} |`,
      );
    }
  };
  rows(`GET /products (${int(s.products)} products, ${kb(full.bare.bytes)})`, full);
  rows(`GET /products?brand=… (no match, ${int(small.bare.bytes)} B)`, small);
  const failures = LOADED.filter((n) => full[n].non2xx + full[n].errors + small[n].non2xx + small[n].errors > 0);
  push(
    "",
    `Each figure is the median over the ${s.rounds} round(s). ` +
      "Requests/s counts 2xx responses; p50/p99 are autocannon's. *Worker CPU* is the CPU time of the workerd process that runs the worker " +
      "(its isolate plus miniflare's local D1 and Durable Object emulators) per request, from /proc: what serving costs, whatever the load generator costs " +
      `(autocannon itself used ${full.bare.loadCpuMs.toFixed(2)} ms per GET /products response and ${small.bare.loadCpuMs.toFixed(2)} ms per small one, on the same cores). ` +
      "The second request is the same route, admission and handler with a tiny body, so it shows what the key check and the limiter cost.",
  );
  if (s.rounds > 1) {
    const perRound = (kind: "full" | "small") =>
      LOADED.map((n) => `${n} ${r.loads[kind][n].map((x) => int(x.rps)).join(" / ")}`).join("; ");
    push("", `Each round's req/s: GET /products: ${perRound("full")}. Small response: ${perRound("small")}.`);
  }
  if (r.viaProxy.length > 0)
    push("", `Loaded through wrangler's dev proxy (the runtime's own socket was not found): ${r.viaProxy.join(", ")}.`);
  if (failures.length > 0) {
    push(
      "",
      `Non-2xx or failed requests during the loads: ${failures.map((n) => `${n}: ${full[n].non2xx + small[n].non2xx} non-2xx, ${full[n].errors + small[n].errors} errors`).join("; ")}.`,
    );
  }

  // ---- Aims ----
  const seen = r.work.seen;
  // The key object's one D1 read when it first wakes; the catalogue's freshness check reads R2, not D1.
  const firstWake = 1;
  const revocationLag = r.revocations.reduce((sum, t) => sum + t.admittedAfter, 0);
  // The issue's aims, each judged on both requests (small response and the full list) of this run.
  const both = (
    measure: (t: Record<WorkerName, Summary>) => number,
    show: (n: number) => string,
    ok: (n: number) => boolean,
  ): [string, boolean] => {
    const [f, sm] = [measure(full), measure(small)];
    return [`GET /products ${show(f)}; small response ${show(sm)}`, ok(f) && ok(sm)];
  };
  const rpsRatio = (peer: WorkerName) =>
    both(
      (t) => t.ours.rps / t[peer].rps,
      ratio,
      () => true,
    )[0];
  // The aim is the floor: floor-write is one RPC and one SQLite write a request, the least an exact, durable limiter does.
  // The other peers are stated as measured (ours ÷ peer), without an aim: past floor-write they are past the design.
  const aims: [string, string, boolean][] = [
    [
      "ours ≥ 1.0 × floor-write (req/s)",
      ...both(
        (t) => t.ours.rps / t["floor-write"].rps,
        ratio,
        (n) => n >= 1,
      ),
    ],
    [
      "ours' worker CPU/request within 0.1 ms of floor-write's",
      ...both(
        (t) => t.ours.workerCpuMs - t["floor-write"].workerCpuMs,
        (n) => `${signedMs(n)} ms`,
        (n) => n <= 0.1,
      ),
    ],
    [
      "zero admitted beyond the limit (ours)",
      `${r.exact.ours.beyondLimit} beyond the limit of ${r.exact.ours.keys * r.exact.ours.limit} allowed`,
      r.exact.ours.beyondLimit === 0,
    ],
    [
      "zero revocation lag (ours)",
      `${revocationLag} admitted after DELETE answered (${r.revocations.length} trial(s))`,
      revocationLag === 0,
    ],
    [
      "zero D1 queries per request for a seen key (ours)",
      `${seen.withD1} of ${seen.samples} requests made one (in ${seen.seconds.toFixed(1)} s; a key's first request reads it once)`,
      seen.withD1 <= firstWake,
    ],
  ];
  // A quick run's 2 s loads, one round, are a smoke test: its throughput verdicts are rough.
  const judged = (i: number, ok: boolean) => (r.mode === "quick" && i < 2 ? `${verdict(ok)} (quick run, rough)` : verdict(ok));
  push("", "| aim | measured | |", "|---|---|---|", ...aims.map(([aim, measured, ok], i) => `| ${aim} | ${measured} | ${judged(i, ok)} |`));
  const peers: WorkerName[] = ["bare", "hono-rate-limiter", "native", "floor-rpc"];
  push("", `Ours ÷ each other peer (req/s), measured, no aim: ${peers.map((peer) => `${peer}: ${rpsRatio(peer)}`).join("; ")}.`);

  // ---- Exactness ----
  push(
    "",
    `**Exactness**: ${r.exact.ours.requestsPerKey} concurrent requests (3 × the limit) at each of ${r.exact.ours.keys} fresh Free keys (${r.exact.ours.limit}/min), all at once.`,
    "",
    "| worker | admitted | beyond the limit | keys over | 429 | other |",
    "|---|---:|---:|---:|---:|---|",
  );
  for (const name of LOADED) {
    const e = r.exact[name];
    if (!e) continue;
    push(
      `| ${name} | ${e.admitted} | ${e.beyondLimit} | ${e.keysOver} | ${e.refused} | ${statuses(e.otherStatuses)}${e.crossedMinute ? " (burst crossed a clock minute)" : ""} |`,
    );
  }
  push(
    "",
    "The native binding is miniflare's local emulation (exact, clock-aligned 60 s windows); Cloudflare documents the deployed binding as per-location and approximate.",
  );

  // ---- Revocation ----
  push(
    "",
    "**Revocation lag** (ours): 4 request loops with one Premium key, `DELETE /api-keys/:id` after 0.4 s, firing on for 0.6 s; 200s among requests that started after the DELETE's response arrived.",
    "",
    "| trial | requests | started after DELETE | admitted after DELETE | in flight at DELETE, admitted | DELETE took | statuses after |",
    "|---:|---:|---:|---:|---:|---:|---|",
    ...r.revocations.map(
      (t, i) =>
        `| ${i + 1} | ${t.sent} | ${t.sentAfter} | ${t.admittedAfter} | ${t.inFlightAdmitted} | ${ms(t.deleteMs)} ms | ${statuses(t.statusesAfter)} |`,
    ),
  );

  // ---- Work ----
  push(
    "",
    "**Work per request** (ours, `X-Work-Counts`: D1 round trips, calls to the key's Durable Object, calls to other buckets' objects):",
    "",
    "| request | work |",
    "|---|---|",
    `| a key's first request (its object has never read it: the client IP's bucket is looked at, then the object reads D1 once) | ${workText(r.work.coldKey)} |`,
    `| a seen key, ${seen.samples} sequential requests | D1 ${seen.d1Total} in total (${seen.withD1} requests), key-do ${seen.keyDoTotal}, other-do ${seen.otherDoTotal}; ${statuses(seen.statuses)} |`,
    `| a malformed key (bad checksum) | ${workText(r.work.malformed)} |`,
    `| a key over its limit: the refusal its object makes | ${workText(r.work.firstRefusal)} |`,
    `| a key over its limit: later refusals (its object again: no isolate remembers a key's refusal; it writes them at most once a second) | ${workText(r.work.laterRefusal)} |`,
  );

  // ---- Catalogue ----
  const c = r.catalogue;
  push(
    "",
    `**The catalogue** (ours, ${int(c.products)} products, one connection, sequential requests):`,
    "",
    "| request | p50 ms | p99 ms | req/s | body |",
    "|---|---:|---:|---:|---:|",
    `| GET /products | ${ms(c.full.p50)} | ${ms(c.full.p99)} | ${int(c.full.rps)} | ${kb(c.bytes)} |`,
    `| GET /products, If-None-Match → ${c.status304} | ${ms(c.notModified.p50)} | ${ms(c.notModified.p99)} | ${int(c.notModified.rps + (c.notModified.statusCodes["304"] ?? 0) / c.notModified.seconds)} | ${c.bytes304} bytes |`,
  );

  push(
    "",
    `**The catalogue snapshot by size** (${r.catalogueSizes.map((c) => int(c.products)).join(", ")} products; docs/catalogue.md explains the design):`,
    "",
    catalogueReport(r.catalogueSizes),
    "",
    CATALOGUE_NOTES,
  );

  push("", ...webhookLatencyReport(r.webhooks));

  // ---- Memory ----
  push(
    "",
    "**Memory after the run**: the worker's isolate (V8's heap in use, which includes garbage not yet collected, and its ArrayBuffers, " +
      "where the serialised catalogue lives; the Durable Objects share the isolate), through wrangler's inspector; and the resident memory " +
      "(VmRSS, and VmHWM, its peak, from /proc) of the workerd process that runs the worker, which also holds miniflare's local D1 and " +
      "Durable Object emulators, SQLite caches and the allocator's free memory.",
    "",
    "| worker | isolate heap used MiB | heap total MiB | ArrayBuffers MiB | workerd RSS MiB | RSS peak MiB |",
    "|---|---:|---:|---:|---:|---:|",
  );
  const mib = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? "–" : n.toFixed(1));
  for (const [name, m] of Object.entries(r.memory)) {
    const label = name === "catalogue" ? `ours, ${int(c.products)} products` : name;
    push(
      `| ${label} | ${mib(m?.heapUsedMb)} | ${mib(m?.heapTotalMb)} | ${mib(m?.buffersMb)} | ${m ? m.rssMb.toFixed(0) : "not found"} | ${m ? m.peakMb.toFixed(0) : "–"} |`,
    );
  }
  push(
    "",
    "**Where the CPU goes** (V8's sampling profiler in the worker's isolate during a small-response load; the Durable Objects run in the same " +
      "isolate locally, so the key's object is in it too; self time, % of the time the isolate was busy):",
  );
  for (const [name, hot] of Object.entries(r.profiles)) {
    push("", `| ${name}: function | where | self % |`, "|---|---|---:|");
    for (const f of hot) push(`| ${f.name} | ${f.where} | ${f.selfPercent.toFixed(1)} |`);
  }
  push("", `The whole run took ${r.seconds.toFixed(0)} s.`);
  return lines.join("\n");
}
