/**
 * The load generator of `npm run bench -- --soak`, a process of its own like bench/load/round-robin.ts:
 * `node bench/load/soak.ts <job.json>`, one JSON result on stdout.
 *
 * autocannon for `seconds` at a fixed number of connections over many API keys: every
 * `overLimitEvery`-th request goes to the next over-limit key in turn, the others to the next
 * key under its limit. Each response is recorded with the key it carried and the time it was sent.
 */
import { readFileSync } from "node:fs";
import autocannon from "autocannon";
import { type Admission, mostInOneWindow, percentile } from "./soak-checks.ts";

export interface SoakKey {
  key: string;
  id: string;
  accountId: string;
  perMinute: number;
}

export interface SoakJob {
  url: string;
  path: string;
  connections: number;
  seconds: number;
  underLimit: SoakKey[];
  overLimit: SoakKey[];
  overLimitEvery: number;
  /** Every key once before the timed phase. */
  warmup: boolean;
}

interface SoakSecond {
  /** Start of the second, ms since the epoch. */
  atMs: number;
  ok: number;
  refused: number;
  other: number;
  p99: number;
}

export interface KeyCounts {
  admitted: number;
  refused: number;
  other: number;
  /** Requests handed to a connection: more than the answers by those still in flight when the load stopped (the server may have counted them). */
  sent: number;
}

export interface SoakLoadResult {
  /** When the warm-up (every key once) ended and the timed phase began. */
  warmupEndedMs: number;
  warmupSeconds: number;
  seconds: number;
  requests: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  series: SoakSecond[];
  /** Per key, in the job's order: under-limit keys, then over-limit keys. */
  counts: KeyCounts[];
  /** How many responses were non-2xx other than 429, or 429 on a key never pushed past its limit. */
  unexpectedTotal: number;
  /** The first 100 of them. */
  unexpected: { status: number; overLimitKey: boolean }[];
  /** Keys whose 200s within one 60 s window exceeded their per-minute limit, with the most seen. */
  overAdmitted: { id: string; perMinute: number; most: number }[];
}

const job = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as SoakJob;
const keys = [...job.underLimit, ...job.overLimit];
const overLimitFrom = job.underLimit.length;
const counts: KeyCounts[] = keys.map(() => ({ admitted: 0, refused: 0, other: 0, sent: 0 }));
const admissions: Admission[][] = keys.map(() => []);
const seconds = new Map<number, { ok: number; refused: number; other: number; latencies: number[] }>();
const unexpected: SoakLoadResult["unexpected"] = [];
let sent = 0;
let nextUnder = 0;
let nextOver = 0;

interface Context {
  keyIndex?: number;
  sentMs?: number;
}

/**
 * One autocannon run over the keys: `pick` chooses each request's key. Every answer is counted for
 * its key (the usage and limit checks cover the warm-up too); only the timed phase fills the series.
 */
function run(options: { pick: () => number; timed: boolean } & ({ seconds: number } | { amount: number })) {
  return autocannon({
    url: job.url,
    connections: job.connections,
    ...("seconds" in options ? { duration: options.seconds } : { amount: options.amount }),
    timeout: 30,
    requests: [
      {
        method: "GET",
        path: job.path,
        setupRequest: (request, context: Context) => {
          const keyIndex = options.pick();
          context.keyIndex = keyIndex;
          context.sentMs = Date.now();
          counts[keyIndex]!.sent++;
          return { ...request, headers: { ...request.headers, authorization: `Bearer ${keys[keyIndex]!.key}` } };
        },
        onResponse: (status, _body, context: Context) => {
          const now = Date.now();
          if (context.keyIndex === undefined || context.sentMs === undefined) return;
          let bucket = { ok: 0, refused: 0, other: 0, latencies: [] as number[] };
          if (options.timed) {
            const second = Math.floor(now / 1000) * 1000;
            bucket = seconds.get(second) ?? bucket;
            seconds.set(second, bucket);
            bucket.latencies.push(now - context.sentMs);
          }
          const counted = counts[context.keyIndex]!;
          const overLimitKey = context.keyIndex >= overLimitFrom;
          if (status >= 200 && status < 300) {
            bucket.ok++;
            counted.admitted++;
            admissions[context.keyIndex]!.push({ sentMs: context.sentMs, receivedMs: now });
          } else if (status === 429) {
            bucket.refused++;
            counted.refused++;
            if (!overLimitKey) unexpected.push({ status, overLimitKey });
          } else {
            bucket.other++;
            counted.other++;
            unexpected.push({ status, overLimitKey });
          }
        },
      },
    ],
  });
}

// The warm-up: every key once, so each key's object exists before the timed phase (locally each is a
// SQLite file created on its first request; the memory that takes is not what the soak watches for).
let warmed = 0;
const warmupStartedMs = Date.now();
const warmup = job.warmup ? await run({ pick: () => warmed++ % keys.length, timed: false, amount: keys.length }) : undefined;
const warmupEndedMs = Date.now();
const instance = run({
  pick: () => {
    const over = job.overLimit.length > 0 && sent++ % job.overLimitEvery === 0;
    return over ? overLimitFrom + (nextOver++ % job.overLimit.length) : nextUnder++ % job.underLimit.length;
  },
  timed: true,
  seconds: job.seconds,
});

instance.on("done", (result) => {
  const statusCodes: Record<string, number> = {};
  for (const stats of [warmup?.statusCodeStats, result.statusCodeStats]) {
    for (const [code, { count }] of Object.entries(stats ?? {})) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  }
  const overAdmitted: SoakLoadResult["overAdmitted"] = [];
  keys.forEach((key, i) => {
    const most = mostInOneWindow(admissions[i]!);
    if (most > key.perMinute) overAdmitted.push({ id: key.id, perMinute: key.perMinute, most });
  });
  const series = [...seconds.entries()]
    .sort(([a], [b]) => a - b)
    .map(([atMs, b]): SoakSecond => ({ atMs, ok: b.ok, refused: b.refused, other: b.other, p99: percentile(b.latencies, 99) }));
  const out: SoakLoadResult = {
    seconds: result.duration,
    warmupEndedMs,
    warmupSeconds: (warmupEndedMs - warmupStartedMs) / 1000,
    requests: (warmup?.requests.total ?? 0) + result.requests.total,
    errors: (warmup?.errors ?? 0) + result.errors,
    timeouts: (warmup?.timeouts ?? 0) + result.timeouts,
    statusCodes,
    series,
    counts,
    unexpectedTotal: unexpected.length,
    unexpected: unexpected.slice(0, 100),
    overAdmitted,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
});
