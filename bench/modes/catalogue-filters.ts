/**
 * Filtered reads of GET /products (docs/catalogue.md, "Filtered reads"), a part of the catalogue
 * bench (bench/modes/catalogue.ts runs it on its worker once the snapshot serves): filters matching 0 %,
 * 1 % and 10 % of the products (the seed's categories of known share, scripts/seed.ts) and one
 * competitor, each read whole with gzip, as Cloudflare's edge asks: the CPU time of the runtime workerd
 * process over the request (read from /proc: the isolate plus the local D1 and R2 it emulates, so
 * an upper bound of the worker's own) and the time.
 */
import { request } from "node:http";
import { runtimeCpuMs, type Worker } from "../harness/processes.ts";
import { median } from "../harness/stats.ts";

const FILTERED_READS = [
  { name: "0 %", query: "category=none-such" },
  { name: "1 %", query: "category=drones" },
  { name: "10 %", query: "category=accessories" },
  { name: "a competitor", query: "competitor=cmp_amazon" },
] as const;

/** Each filter is read this many times; the median of each figure is kept. */
const RUNS = 3;

export interface FilteredRead {
  name: string;
  query: string;
  cpuMs: number;
  totalMs: number;
  bytes: number;
  products: number;
  work: string;
}

/** The lines of an NDJSON body (gzip or not), counted as it streams: at 1,000,000 products a body is larger than a string may be. */
async function productCount(url: string, headers: Record<string, string>): Promise<number> {
  const res = await fetch(url, { headers });
  if (res.status !== 200 || !res.body) throw new Error(`GET ${url} answered ${res.status}`);
  let lines = 0;
  for await (const chunk of res.body) {
    const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    for (let at = bytes.indexOf(10); at !== -1; at = bytes.indexOf(10, at + 1)) lines++;
  }
  return lines;
}

/** One GET read to its end (node:http, which never decodes gzip): time and bytes on the wire. */
function timedRead(url: string, headers: Record<string, string>): Promise<{ totalMs: number; bytes: number; work: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(url, { headers }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`GET ${url} answered ${res.statusCode}`));
      let bytes = 0;
      res.on("data", (chunk: Buffer) => (bytes += chunk.length));
      res.on("end", () => resolve({ totalMs: performance.now() - started, bytes, work: String(res.headers["x-work-counts"] ?? "") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

export async function measureFilteredReads(worker: Worker, key: string): Promise<FilteredRead[]> {
  const url = `${worker.directUrl}/products`;
  const auth = { Authorization: `Bearer ${key}` };
  const results: FilteredRead[] = [];
  for (const { name, query } of FILTERED_READS) {
    // The product count from the NDJSON form, once; the timed reads are the gzip JSON form.
    const lines = await productCount(`${url}?${query}`, { ...auth, Accept: "application/x-ndjson", "Accept-Encoding": "gzip" });
    const runs: { cpuMs: number; totalMs: number; bytes: number; work: string }[] = [];
    for (let run = 0; run < RUNS; run++) {
      const cpuBefore = runtimeCpuMs(worker);
      const read = await timedRead(`${url}?${query}`, { ...auth, "Accept-Encoding": "gzip" });
      runs.push({ ...read, cpuMs: runtimeCpuMs(worker) - cpuBefore });
    }
    results.push({
      name,
      query,
      cpuMs: median(runs.map((r) => r.cpuMs)),
      totalMs: median(runs.map((r) => r.totalMs)),
      bytes: runs[0]!.bytes,
      products: lines,
      work: runs[0]!.work,
    });
  }
  return results;
}

const seconds = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`);

/** The report's rows: one per filter, CPU / time / products. */
export const filteredReadRows = <R extends { filteredReads: FilteredRead[] }>(): [string, (r: R) => string][] =>
  FILTERED_READS.map(({ name, query }, i) => [
    `?${query} (${name}), gzip: CPU / total / products`,
    (r: R) => {
      const read = r.filteredReads[i]!;
      return `${seconds(read.cpuMs)} / ${seconds(read.totalMs)} / ${read.products.toLocaleString("en")}`;
    },
  ]);
