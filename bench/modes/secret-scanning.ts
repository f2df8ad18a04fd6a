/**
 * `npm run bench -- --secret-scanning`: what a GitHub secret-scanning report costs and how fast it bites,
 * on the real worker (wrangler dev, local D1 and Durable Objects). The bench plays GitHub: it makes a
 * P-256 key pair, serves the public key as the list SECRET_SCANNING_KEYS_URL names, and signs each
 * report over its raw body as GitHub does (base64 DER in Github-Public-Key-Signature).
 *
 * - From a report's arrival to the key's first refusal: a client uses the key in a loop, one request at a
 *   time; the report of that key is sent meanwhile. Measured from the moment the report is sent to the
 *   first 401 the client receives, beside the report's own answer; and any 200 to a request sent after
 *   the report was answered (there must be none: the key is revoked before the answer).
 * - What a report costs at two sizes (1,000 and 10,000 tokens; 10 live keys each, the rest made-up tokens
 *   of the right format and checksum, which cost a lookup, and a few of the wrong format, which cost
 *   nothing) beside a report of one token: the answer's time, the D1 round trips (X-Work-Counts) and the
 *   worker's CPU.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { generateApiKey } from "../../src/api-keys/format.ts";
import { p1363ToDer } from "../../test/helpers/der.ts";
import type { Bench } from "../harness/bench.ts";
import { type BenchKey, makeKeys } from "../harness/keys.ts";
import { workerCpu } from "../harness/processes.ts";
import type { Run } from "../harness/settings.ts";
import { seedState } from "../harness/setup.ts";
import { freezeWorkers, openApiProbe, startReady } from "../harness/start.ts";
import { machine, nowUtc } from "../report/run-info.ts";

interface ReportSigner {
  /** The key list's URL, for SECRET_SCANNING_KEYS_URL. */
  url: string;
  server: Server;
  sign(body: string): Promise<Record<string, string>>;
}

const IDENTIFIER = "bench-secret-scanning-key";

/** GitHub's side: a key pair, its public key served as GitHub's list is, and a signer. */
async function startReportSigner(): Promise<ReportSigner> {
  const pair = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const spki = Buffer.from(await crypto.subtle.exportKey("spki", pair.publicKey)).toString("base64");
  const pem = `-----BEGIN PUBLIC KEY-----\n${spki.match(/.{1,64}/g)!.join("\n")}\n-----END PUBLIC KEY-----\n`;
  const list = JSON.stringify({ public_keys: [{ key_identifier: IDENTIFIER, key: pem, is_current: true }] });
  const server = createServer((_, res) => res.writeHead(200, { "Content-Type": "application/json" }).end(list));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/meta/public_keys/secret_scanning`,
    server,
    async sign(body) {
      const raw = new Uint8Array(
        await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(body)),
      );
      return {
        "Content-Type": "application/json",
        "Github-Public-Key-Identifier": IDENTIFIER,
        "Github-Public-Key-Signature": Buffer.from(p1363ToDer(raw)).toString("base64"),
      };
    },
  };
}

const reported = (token: string) => ({
  token,
  type: "price_data_api_key",
  url: "https://github.com/bench/leaky/blob/main/config.js",
  source: "content",
});

interface Sent {
  status: number;
  ms: number;
  d1: number;
}

async function sendReport(baseUrl: string, signer: ReportSigner, tokens: readonly string[]): Promise<Sent> {
  const body = JSON.stringify(tokens.map(reported));
  const headers = await signer.sign(body);
  const started = performance.now();
  const res = await fetch(`${baseUrl}/secret-scanning/github`, { method: "POST", headers, body });
  await res.arrayBuffer();
  const ms = performance.now() - started;
  const counts = res.headers.get("X-Work-Counts") ?? "";
  return { status: res.status, ms, d1: Number(/d1=(\d+)/.exec(counts)?.[1] ?? Number.NaN) };
}

interface RefusalSample {
  reportMs: number;
  firstRefusalMs: number;
  /** Requests with the key answered 200 although sent after the report's answer: must be 0. */
  admittedAfterAnswer: number;
}

/** One key: used in a loop, reported meanwhile; until the loop sees its first 401. */
async function timeToRefusal(baseUrl: string, signer: ReportSigner, key: string): Promise<RefusalSample> {
  const get = () => fetch(`${baseUrl}/events?limit=1`, { headers: { Authorization: `Bearer ${key}` } });
  const warm = await get();
  await warm.arrayBuffer();
  if (warm.status !== 200) throw new Error(`the key answered ${warm.status} before its report`);
  let sentAt = 0;
  let answeredAt = Number.POSITIVE_INFINITY;
  let admittedAfterAnswer = 0;
  const loop = (async () => {
    for (;;) {
      const requestedAt = performance.now();
      const res = await get();
      await res.arrayBuffer();
      if (res.status === 401) return performance.now();
      if (res.status === 200 && requestedAt > answeredAt) admittedAfterAnswer++;
      if (performance.now() - sentAt > 30_000) throw new Error("the key was still admitted 30 s after its report");
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 20)); // the loop is running
  sentAt = performance.now();
  const answer = await sendReport(baseUrl, signer, [key]);
  answeredAt = performance.now();
  if (answer.status !== 200) throw new Error(`the report answered ${answer.status}`);
  const refusedAt = await loop;
  return { reportMs: answeredAt - sentAt, firstRefusalMs: refusedAt - sentAt, admittedAfterAnswer };
}

interface ReportCost {
  tokens: number;
  live: number;
  runs: Sent[];
  cpuMs: number[];
}

interface SecretScanningResults {
  refusals: RefusalSample[];
  costs: ReportCost[];
}

/**
 * `keys`: live keys, used up by the measures (a reported key is revoked). `cpuSeconds`: the worker's CPU
 * seconds so far. Each size runs `runs` times, each with live keys of its own.
 */
async function measureSecretScanning(options: {
  url: string;
  signer: ReportSigner;
  keys: BenchKey[];
  cpuSeconds: () => number;
  refusalSamples: number;
  sizes: readonly number[];
  runs: number;
  step: (message: string) => void;
}): Promise<SecretScanningResults> {
  const keys = [...options.keys];
  const take = (n: number) => {
    if (keys.length < n) throw new Error("not enough bench keys for the secret-scanning measures");
    return keys.splice(0, n).map((k) => k.key);
  };
  // The worker fetches GitHub's key list on the first report; a report of nothing does that outside the measures.
  await sendReport(options.url, options.signer, []);

  options.step(`time to first refusal: ${options.refusalSamples} keys, one at a time`);
  const refusals: RefusalSample[] = [];
  for (let i = 0; i < options.refusalSamples; i++) refusals.push(await timeToRefusal(options.url, options.signer, take(1)[0]!));

  const costs: ReportCost[] = [];
  for (const size of [1, ...options.sizes]) {
    const live = Math.min(size, 10);
    options.step(`a report of ${size.toLocaleString("en")} tokens (${live} live), ${options.runs} runs`);
    const cost: ReportCost = { tokens: size, live, runs: [], cpuMs: [] };
    for (let run = 0; run < options.runs; run++) {
      const made = Array.from({ length: size - live }, (_, i) =>
        // One in ten of the wrong format (never looked up); the rest well-formed, matching no key.
        i % 10 === 0 ? `pda_live_${"x".repeat(40)}${i}` : generateApiKey("pda").key,
      );
      const tokens = [...take(live), ...made];
      const cpuBefore = options.cpuSeconds();
      const sent = await sendReport(options.url, options.signer, tokens);
      cost.cpuMs.push((options.cpuSeconds() - cpuBefore) * 1000);
      if (sent.status !== 200) throw new Error(`a report of ${size} tokens answered ${sent.status}`);
      cost.runs.push(sent);
    }
    costs.push(cost);
  }
  return { refusals, costs };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const ms = (value: number) => `${value.toFixed(0)} ms`;

function secretScanningReport(results: SecretScanningResults): string[] {
  const { refusals, costs } = results;
  const lines = [
    `### Secret scanning (\`npm run bench -- --secret-scanning\`), ${nowUtc()}`,
    "",
    `From a report's arrival to the key's first refusal, ${refusals.length} keys one at a time (a client using the key in a loop while its report is sent):`,
    "",
    "| | median | max |",
    "|---|---:|---:|",
    `| report answered (key revoked before the answer) | ${ms(median(refusals.map((r) => r.reportMs)))} | ${ms(Math.max(...refusals.map((r) => r.reportMs)))} |`,
    `| first 401 received by the key's client | ${ms(median(refusals.map((r) => r.firstRefusalMs)))} | ${ms(Math.max(...refusals.map((r) => r.firstRefusalMs)))} |`,
    "",
    `Requests admitted after a report was answered: ${refusals.reduce((sum, r) => sum + r.admittedAfterAnswer, 0)}.`,
    "",
    "What a report costs (median of the runs; made-up tokens: nine in ten of the right format and checksum, so looked up):",
    "",
    "| tokens | live keys (each one call to its key's object) | answer | D1 round trips | worker CPU |",
    "|---:|---:|---:|---:|---:|",
  ];
  for (const cost of costs) {
    lines.push(
      `| ${cost.tokens.toLocaleString("en")} | ${cost.live} | ${ms(median(cost.runs.map((r) => r.ms)))} | ${median(cost.runs.map((r) => r.d1))} | ${ms(median(cost.cpuMs))} |`,
    );
  }
  return lines;
}

/**
 * `npm run bench -- --secret-scanning [--quick]`: the real worker alone, GitHub played by the bench;
 * writes bench/results/secret-scanning.md and secret-scanning.json.
 */
export async function secretScanningMode(bench: Bench, { size }: Run): Promise<string> {
  const refusalSamples = size === "quick" ? 5 : 20;
  const runs = size === "quick" ? 1 : 3;
  const sizes = [1_000, 10_000];
  const signer = await startReportSigner();
  bench.closeAtEnd(signer.server);
  const keys = await makeKeys({ load: refusalSamples + runs * (1 + 10 * sizes.length), exact: 0, revoke: 0 });
  const d1 = join(bench.state, "d1");
  const [, { ours }] = await Promise.all([seedState(d1, 10, keys.sql), freezeWorkers(bench, ["ours"])]);
  const vars = await bench.workerVars({ SECRET_SCANNING_KEYS_URL: signer.url, EXPOSE_WORK_COUNTS: "true" });
  const {
    workers: [worker],
  } = await startReady(bench, [{ name: "ours", config: ours, persistTo: d1, vars }], openApiProbe({ direct: true }));
  const results = await measureSecretScanning({
    url: worker!.directUrl,
    signer,
    keys: keys.load,
    cpuSeconds: () => workerCpu(worker!).runtime,
    refusalSamples,
    sizes,
    runs,
    step: bench.step,
  });
  const text = secretScanningReport(results).join("\n");
  bench.writeResults({
    "secret-scanning.md": `${text}\n`,
    "secret-scanning.json": `${JSON.stringify({ machine: machine(), results }, null, 2)}\n`,
  });
  return text;
}
