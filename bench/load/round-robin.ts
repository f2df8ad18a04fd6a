/**
 * The load generator of `npm run bench`, run by bench/run.ts as a process of its own so that its
 * work is not mixed with the orchestrator's: `node bench/load/round-robin.ts <job.json>`, one JSON result on stdout.
 *
 * autocannon at a fixed number of connections for a fixed time (or a fixed number of requests),
 * each request carrying the next API key in turn (round robin over all of them).
 */
import { readFileSync } from "node:fs";
import autocannon from "autocannon";

export interface LoadJob {
  url: string;
  /** Path and query of every request. */
  path: string;
  connections: number;
  /** Seconds; ignored when `amount` is set. */
  duration: number;
  /** A fixed number of requests instead of a duration. */
  amount?: number;
  /** Bearer keys, used in turn; none sends no Authorization header. */
  keys: string[];
  headers?: Record<string, string>;
}

export interface LoadResult {
  requests: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  seconds: number;
  /** 2xx responses per second over the run. */
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  /** Bytes received per response, headers included, averaged. */
  bytesPerResponse: number;
  statusCodes: Record<string, number>;
  /** CPU the load generator itself used, ms. */
  cpuMs: number;
}

const job = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as LoadJob;
let next = 0;

const instance = autocannon({
  url: job.url,
  connections: job.connections,
  ...(job.amount ? { amount: job.amount } : { duration: job.duration }),
  timeout: 30,
  headers: job.headers ?? {},
  requests: [
    {
      method: "GET",
      path: job.path,
      setupRequest: (request) => {
        if (job.keys.length === 0) return request;
        const key = job.keys[next++ % job.keys.length]!;
        return { ...request, headers: { ...request.headers, authorization: `Bearer ${key}` } };
      },
    },
  ],
});

instance.on("done", (result) => {
  const seconds = result.duration;
  const ok = result["2xx"];
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = count;
  const out: LoadResult = {
    requests: result.requests.total,
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds,
    rps: ok / seconds,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    bytesPerResponse: result.requests.total ? result.throughput.total / result.requests.total : 0,
    statusCodes,
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
});
