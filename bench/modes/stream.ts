/**
 * `npm run bench -- --stream`: the event stream fed by push (src/stream/hub.ts) on the real worker alone
 * (`wrangler dev`, talked to on the runtime's own socket). At each number of open streams (100, then 500),
 * spread over accounts of 5 keys with 5 streams each (the caps): first an idle minute (the runtime's CPU while
 * nothing happens; D1 queries an idle stream makes are counted at the binding by test/stream/stream.test.ts),
 * then price changes ingested at a steady rate, one observation each, every stream receiving every change. The
 * latency is from the ingestion's answer to each stream's frame of it.
 */
import type { Bench } from "../harness/bench.ts";
import { type Worker, workerCpu } from "../harness/processes.ts";
import type { Run } from "../harness/settings.ts";
import { startOursAlone } from "../harness/start.ts";

const STREAM_COUNTS = [100, 500] as const;
const STREAMS_PER_KEY = 5;
const KEYS_PER_ACCOUNT = 5;
const CHANGES_PER_SECOND = 2;
const LOAD_SECONDS = 20;
const IDLE_SECONDS = 60;

interface Round {
  streams: number;
  accounts: number;
  changes: number;
  frames: { expected: number; received: number };
  latency: { p50: number; p99: number; max: number };
  /** The runtime's CPU (ms) per change ingested: the ingestion, the publish, the hubs and every stream's frame. */
  cpuPerChange: number;
  /** The runtime's CPU (ms) over the idle minute, per open stream. */
  idleCpuPerStreamMinute: number;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function streamMode(bench: Bench, _run: Run): Promise<string> {
  const worker = await startOursAlone(bench, { direct: true });
  const rounds: Round[] = [];
  for (const streams of STREAM_COUNTS) rounds.push(await round(bench, worker, streams));
  return report(rounds);
}

async function round(bench: Bench, worker: Worker, count: number): Promise<Round> {
  const base = worker.directUrl ?? worker.url;
  const api = async <T = unknown>(method: string, path: string, token: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${await res.text()}`);
    return res.json() as Promise<T>;
  };
  const admin = await bench.token("bench-stream-admin", "prices:write accounts:write");
  const run = Date.now();
  const accounts = Math.ceil(count / (STREAMS_PER_KEY * KEYS_PER_ACCOUNT));
  bench.step(`the stream at ${count} streams: ${accounts} accounts of ${KEYS_PER_ACCOUNT} keys`);
  const keys: string[] = [];
  for (let a = 0; a < accounts; a++) {
    const sub = `bench-stream-${count}-${a}`;
    await api("PUT", `/admin/accounts/${sub}/plan`, admin, { plan: "premium" });
    const token = await bench.token(sub);
    for (let k = 0; k < KEYS_PER_ACCOUNT; k++)
      keys.push((await api<{ key: string }>("POST", "/api-keys", token, { name: `bench stream ${k}` })).key);
  }
  const changes = CHANGES_PER_SECOND * LOAD_SECONDS;
  const skus = Array.from({ length: changes }, (_, i) => `BENCH-PUSH-${run}-${i}`);
  const observation = (sku: string, price: string) => ({
    sku,
    name: sku,
    competitor: { id: "cmp_bench_push", name: "Bench" },
    price,
    currency: "USD",
    in_stock: true,
  });
  // The products first: a product's first observation is no change.
  await api("POST", "/admin/observations", admin, { observations: skus.map((sku) => observation(sku, "10.00")) });

  // The streams, each recording when each change's frame arrived.
  const arrivals: Map<string, number>[] = [];
  // One controller a stream: one signal shared by hundreds of requests would collect hundreds of listeners.
  const aborts: AbortController[] = [];
  const readers: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const key = keys[Math.floor(i / STREAMS_PER_KEY)]!;
    const abort = new AbortController();
    aborts.push(abort);
    const res = await fetch(`${base}/events/stream?type=price.changed`, {
      headers: { Authorization: `Bearer ${key}` },
      signal: abort.signal,
    });
    if (res.status !== 200 || !res.body) throw new Error(`GET /events/stream answered ${res.status}: ${await res.text()}`);
    const seen = new Map<string, number>();
    arrivals.push(seen);
    readers.push(
      (async () => {
        const decoder = new TextDecoder();
        let buffer = "";
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          const at = performance.now();
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const data = buffer
              .slice(0, end)
              .split("\n")
              .find((line) => line.startsWith("data: "));
            buffer = buffer.slice(end + 2);
            if (data) seen.set((JSON.parse(data.slice(6)) as { data: { sku: string } }).data.sku, at);
          }
        }
      })().catch(() => undefined), // ends when aborted
    );
  }

  bench.step(`${count} streams open: an idle minute`);
  const idleStart = workerCpu(worker).runtime;
  await sleep(IDLE_SECONDS * 1000);
  const idleCpuMs = (workerCpu(worker).runtime - idleStart) * 1000;

  bench.step(`${changes} changes at ${CHANGES_PER_SECOND} a second`);
  const answered = new Map<string, number>();
  const cpuStart = workerCpu(worker).runtime;
  const started = performance.now();
  const ingestions: Promise<void>[] = [];
  for (const [i, sku] of skus.entries()) {
    await sleep(Math.max(0, started + (i * 1000) / CHANGES_PER_SECOND - performance.now()));
    ingestions.push(
      (async () => {
        const res = await fetch(`${base}/admin/observations`, {
          method: "POST",
          headers: { Authorization: `Bearer ${admin}`, "content-type": "application/json" },
          body: JSON.stringify({ observations: [observation(sku, "11.00")] }),
        });
        answered.set(sku, performance.now());
        if (!res.ok) throw new Error(`POST /admin/observations answered ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
      })(),
    );
  }
  await Promise.all(ingestions);
  // The last frames: until every stream has every change, or 10 s.
  const complete = () => arrivals.every((seen) => seen.size >= changes);
  for (const until = Date.now() + 10_000; !complete() && Date.now() < until; ) await sleep(100);
  await sleep(1000); // the publish's tail, so its CPU is counted
  const cpuMs = (workerCpu(worker).runtime - cpuStart) * 1000;
  for (const abort of aborts) abort.abort();
  await Promise.all(readers);

  const latencies = arrivals
    .flatMap((seen) => skus.flatMap((sku) => (seen.has(sku) ? [seen.get(sku)! - answered.get(sku)!] : [])))
    .sort((a, b) => a - b);
  return {
    streams: count,
    accounts,
    changes,
    frames: { expected: count * changes, received: latencies.length },
    latency: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1) ?? NaN },
    cpuPerChange: cpuMs / changes,
    idleCpuPerStreamMinute: idleCpuMs / count / (IDLE_SECONDS / 60),
  };
}

const ms = (n: number, digits = 0) => (Number.isNaN(n) ? "–" : n.toFixed(digits));

function report(rounds: Round[]): string {
  return [
    `**GET /events/stream, pushed** (${CHANGES_PER_SECOND} changes a second for ${LOAD_SECONDS} s, one observation each; every ` +
      "stream receives every change; latency from the ingestion's answer to each stream's frame; CPU is the runtime " +
      "process's, which runs the worker, its hubs and the local D1 together):",
    "",
    "| streams | accounts | frames received | p50 ms | p99 ms | max ms | runtime CPU ms per change | idle runtime CPU ms per stream-minute |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...rounds.map(
      (r) =>
        `| ${r.streams} | ${r.accounts} | ${r.frames.received}/${r.frames.expected} | ${ms(r.latency.p50)} | ${ms(r.latency.p99)} | ` +
        `${ms(r.latency.max)} | ${ms(r.cpuPerChange, 1)} | ${ms(r.idleCpuPerStreamMinute, 2)} |`,
    ),
    "",
    "D1 queries per idle stream-minute: 0 (no code path of an open, idle stream reaches D1; counted at the binding " +
      'by test/stream/stream.test.ts, "an idle stream makes no D1 query"). Before (a 1 s poll): 60, and p50 942 ms.',
  ].join("\n");
}
