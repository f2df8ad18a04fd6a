/** The part of autocannon's API (v9, which ships no types) that bench/load/round-robin.ts and bench/load/soak.ts use. */
declare module "autocannon" {
  interface Request {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    setupRequest?: (request: Request, context: Record<string, number | undefined>) => Request | null;
    onResponse?: (status: number, body: string, context: Record<string, number | undefined>, headers: Record<string, string>) => void;
  }
  interface Options {
    url: string;
    connections?: number;
    duration?: number;
    amount?: number;
    timeout?: number;
    headers?: Record<string, string>;
    requests?: Request[];
  }
  interface Histogram {
    average: number;
    p50: number;
    p90: number;
    p99: number;
    total: number;
  }
  interface Result {
    duration: number;
    requests: Histogram;
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    "2xx": number;
    statusCodeStats?: Record<string, { count: number }>;
  }
  /** Also a promise of the result when no callback is given. */
  interface Instance extends PromiseLike<Result> {
    on(event: "done", listener: (result: Result) => void): void;
  }
  export default function autocannon(options: Options): Instance;
}
