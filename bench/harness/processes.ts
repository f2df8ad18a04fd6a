/**
 * Child processes of `npm run bench`: wrangler (always run by the Node that runs the bench, so
 * Node 22), the load generator, and the workers under `wrangler dev`. Every worker runs in a process
 * group of its own with a guard that ends the group when the bench process is gone, so nothing is
 * left running even if the bench itself is killed; stopAll() ends them on success, error or signal.
 */
import type { ChildProcess } from "node:child_process";
import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { signalGroup, spawnGroup, stopGroups } from "../../scripts/process-group.ts";

export const ROOT = new URL("../..", import.meta.url).pathname;
const WRANGLER = join(ROOT, "node_modules/wrangler/bin/wrangler.js");

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs to completion; rejects with the output's tail when it fails or takes longer than `timeoutMs`. */
export function run(
  command: string,
  args: string[],
  options: { timeoutMs: number; cwd?: string } = { timeoutMs: 120_000 },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawnGroup(command, args, { cwd: options.cwd ?? ROOT, stdio: ["ignore", "pipe", "pipe"] });
    running.add(child);
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => (output += chunk));
    child.stderr?.on("data", (chunk: Buffer) => (output += chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      signalGroup(child.pid, "SIGKILL");
    }, options.timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      if (code === 0) return resolve(output);
      const how = timedOut
        ? `took over ${options.timeoutMs / 1000} s and was stopped`
        : signal
          ? `was stopped (${signal})`
          : `exited with ${code}`;
      reject(new Error(`\`${[command, ...args].join(" ").slice(0, 200)}\` ${how}:\n${output.slice(-3000)}`));
    });
  });
}

export const wrangler = (args: string[], timeoutMs = 120_000) => run(process.execPath, [WRANGLER, ...args], { timeoutMs });

/** Short-lived children (wrangler d1, the load generator), killed by stopAll() if still running. */
const running = new Set<ChildProcess>();

/** Listens on `port` of 127.0.0.1 (0: any) and closes again; the port it got. */
function bindOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

const LOWEST_PORT = 10_000;
const handedOut = new Set<number>();
const kernelEphemeralStart = Number(readFileSafe("/proc/sys/net/ipv4/ip_local_port_range").trim().split(/\s+/)[0]);
/** Where the kernel's ephemeral ports start, when it says and leaves room below; else undefined (then any port). */
const EPHEMERAL_START = kernelEphemeralStart > LOWEST_PORT + 1000 ? kernelEphemeralStart : undefined;

/**
 * A port nothing listens on now, on 127.0.0.1, and not handed out before. Chosen below the kernel's
 * ephemeral range: wrangler binds it only seconds later, and meanwhile every workerd started binds
 * sockets of its own on port 0, which the kernel takes from that range (one of them once took a port
 * picked here, and wrangler failed with "Address already in use").
 */
async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const candidate = EPHEMERAL_START === undefined ? 0 : LOWEST_PORT + Math.floor(Math.random() * (EPHEMERAL_START - LOWEST_PORT));
    if (handedOut.has(candidate)) continue;
    const port = await bindOnce(candidate).catch(() => undefined);
    if (port !== undefined && !handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error("no free port on 127.0.0.1");
}

/**
 * Bundles a worker once (`wrangler deploy --dry-run`) and writes a copy of its configuration that
 * runs that bundle as is (`no_bundle`, no `[build]` step). `wrangler dev` then watches nothing in
 * the checkout: an edit made while the bench runs can neither reload a worker mid-load nor mix
 * two versions of the code into one run.
 */
export async function freeze(config: string, outDir: string): Promise<string> {
  const source = resolve(ROOT, config);
  await wrangler(["deploy", "--dry-run", "--outdir", outDir, "--config", source]);
  let text = readFileSync(source, "utf8");
  text = text.replace(/^\[build\]\n[\s\S]*?(?=^\[|(?![\s\S]))/m, "");
  if (!/^main = .*$/m.test(text)) throw new Error(`${config} has no \`main = …\` line to point at the bundle.`);
  text = text.replace(/^main = .*$/m, `main = ${JSON.stringify(join(outDir, "index.js"))}\nno_bundle = true`);
  text = text.replace(
    /^migrations_dir = "(.*)"$/gm,
    (_, dir: string) => `migrations_dir = ${JSON.stringify(resolve(dirname(source), dir))}`,
  );
  const frozen = join(outDir, "wrangler.toml");
  writeFileSync(frozen, text);
  return frozen;
}

export interface Worker {
  name: string;
  /** wrangler dev's address: its proxy, in front of the workerd that runs the worker. */
  url: string;
  port: number;
  /** The runtime workerd's own address (found once ready), or the proxy's if it could not be found. */
  directUrl: string;
  /** wrangler's inspector proxy for the worker's isolate (Chrome DevTools protocol). */
  inspectorPort: number;
  /** The process group: the guard shell, wrangler and its workerd processes. */
  pgid: number;
  log: string;
  exited: boolean;
}

const workers: Worker[] = [];

/**
 * `wrangler dev` for one worker, on 127.0.0.1 only, with its own persisted state. The guard shell
 * leads the process group: when the bench process (BENCH_PID) or wrangler is gone, it ends the group.
 */
export async function startWorker(options: {
  name: string;
  config: string;
  persistTo: string;
  vars: Record<string, string>;
  log: string;
  /** wrangler's --log-level: "warn" unless the worker's own console.log lines are wanted ("log"). */
  logLevel?: string;
  /** wrangler's --test-scheduled: GET /cdn-cgi/handler/scheduled?cron=… runs the cron handler. */
  testScheduled?: boolean;
}): Promise<Worker> {
  const port = await freePort();
  const inspectorPort = await freePort();
  const args = [
    WRANGLER,
    "dev",
    "--config",
    options.config,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-ip",
    "127.0.0.1",
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    options.persistTo,
    "--log-level",
    options.logLevel ?? "warn",
    "--show-interactive-dev-session=false",
    ...(options.testScheduled ? ["--test-scheduled"] : []),
    ...Object.entries(options.vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
  ];
  // `kill -s SIG 0` signals the guard's own process group (dash's kill takes no negative pid). The
  // guard ignores its own TERM so that it is still there to KILL whatever ignored it.
  const guard = `"$@" & child=$!
while kill -0 "$BENCH_PID" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 1; done
trap '' TERM; kill -s TERM 0; sleep 3; kill -s KILL 0`;
  const out = openSync(options.log, "a");
  const child = spawnGroup("sh", ["-c", guard, "sh", process.execPath, ...args], {
    cwd: ROOT,
    stdio: ["ignore", out, out],
    // X_LOCAL_OBSERVABILITY=false: wrangler dev's local observability (a streaming tail that writes a
    // trace of every invocation, a Durable Object call included, to a local SQLite store) is a
    // development tool with no counterpart on the request path in production. Left on, it costs more
    // than a bare worker's whole request and charges each Durable Object or D1 call a second time.
    env: { BENCH_PID: String(process.pid), X_LOCAL_OBSERVABILITY: "false" },
  });
  closeSync(out);
  const url = `http://127.0.0.1:${port}`;
  const worker: Worker = {
    name: options.name,
    url,
    port,
    directUrl: url,
    inspectorPort,
    pgid: child.pid!,
    log: options.log,
    exited: false,
  };
  child.on("exit", () => (worker.exited = true));
  child.unref();
  workers.push(worker);
  return worker;
}

/** Waits until the worker answers `probe` (any HTTP status counts), at most `timeoutMs`. */
export async function waitReady(worker: Worker, probe: (url: string) => Promise<Response>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (worker.exited) break;
    try {
      const res = await probe(worker.url);
      await res.arrayBuffer();
      if (res.status < 500) return;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  const log = readFileSafe(worker.log).slice(-3000);
  throw new Error(
    `${worker.name} did not become ready within ${timeoutMs / 1000} s${worker.exited ? " (wrangler exited)" : ""}; its log ends:\n${log}`,
  );
}

function readFileSafe(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** Runs a load generator (bench/load/round-robin.ts unless told) as a separate process and returns its JSON result. */
export async function runLoad<T>(jobFile: string, timeoutMs: number, script = "bench/load/round-robin.ts"): Promise<T> {
  const output = await run(process.execPath, [join(ROOT, script), jobFile], { timeoutMs });
  const line = output
    .trim()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .at(-1);
  if (!line) throw new Error(`The load generator printed no result:\n${output.slice(-2000)}`);
  return JSON.parse(line) as T;
}

// ---- Memory --------------------------------------------------------------------------------------

interface ProcInfo {
  pid: number;
  pgid: number;
  comm: string;
  cmdline: string;
}

function processesInGroup(pgid: number): ProcInfo[] {
  const found: ProcInfo[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid pgrp …: comm may hold spaces, so split after its closing parenthesis.
      const close = stat.lastIndexOf(")");
      const fields = stat.slice(close + 2).split(" ");
      if (Number(fields[2]) !== pgid) continue;
      found.push({
        pid: Number(entry),
        pgid,
        comm: stat.slice(stat.indexOf("(") + 1, close),
        cmdline: readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " "),
      });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

const statusKb = (pid: number, field: string) => {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) : NaN;
};

export interface Memory {
  /** The worker's isolate: V8 heap in use and its total size, and the ArrayBuffer backing stores. */
  heapUsedMb?: number;
  heapTotalMb?: number;
  buffersMb?: number;
  /** The workerd process that runs the worker (not wrangler's proxy in front of it). */
  rssMb: number;
  peakMb: number;
  proxyRssMb: number;
}

/**
 * `wrangler dev` starts two workerd processes: a proxy on the public port and the runtime that
 * holds the worker (its isolate plus miniflare's local D1 / Durable Object emulators), which listens
 * on a port of its own choosing (`--socket-addr=entry=127.0.0.1:0`). VmRSS and VmHWM of the latter.
 */
export function workerMemory(worker: Worker): Memory | undefined {
  const { runtime, proxy } = runtimeAndProxy(worker);
  if (!runtime) return undefined;
  return {
    rssMb: statusKb(runtime.pid, "VmRSS") / 1024,
    peakMb: statusKb(runtime.pid, "VmHWM") / 1024,
    proxyRssMb: proxy ? statusKb(proxy.pid, "VmRSS") / 1024 : NaN,
  };
}

// ---- The runtime's own socket, and CPU time ---------------------------------------------------------

function runtimeAndProxy(worker: Worker): { runtime?: ProcInfo; proxy?: ProcInfo } {
  const workerds = processesInGroup(worker.pgid).filter((p) => p.comm === "workerd");
  const proxy = workerds.find((p) => p.cmdline.includes(`entry=127.0.0.1:${worker.port} `));
  return { runtime: workerds.find((p) => p !== proxy), proxy };
}

/**
 * CPU time (user + system, ms) the runtime workerd process has used so far: the worker's isolate and
 * the local D1 and R2 it emulates. /proc/<pid>/stat counts it in clock ticks (100 a second on Linux).
 */
export function runtimeCpuMs(worker: Worker): number {
  const { runtime } = runtimeAndProxy(worker);
  if (!runtime) throw new Error(`The runtime workerd of ${worker.name} is not running`);
  const stat = readFileSync(`/proc/${runtime.pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // After "pid (comm) ": state is field 0, utime field 11, stime field 12.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** TCP ports a process listens on: its socket inodes matched against /proc/<pid>/net/tcp. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const line of readFileSync(`/proc/${pid}/net/tcp`, "utf8").split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/);
    // local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; the inode is the 10th field.
    if (fields[3] === "0A" && inodes.has(fields[9] ?? "")) ports.push(parseInt(fields[1]!.split(":")[1]!, 16));
  }
  return ports;
}

/**
 * wrangler dev's proxy hands every request to a single Durable Object that forwards it to the
 * runtime: a development-only hop that, on two cores, costs about as much CPU as a bare worker and
 * caps everyone's throughput. The bench talks to the runtime's own socket instead: whichever of its
 * listening ports answers `accepts` (the others are its inspector and debug ports).
 */
export async function findDirectUrl(worker: Worker, accepts: (url: string) => Promise<boolean>): Promise<boolean> {
  const { runtime } = runtimeAndProxy(worker);
  if (!runtime) return false;
  for (const port of listeningPorts(runtime.pid)) {
    const url = `http://127.0.0.1:${port}`;
    if (await accepts(url).catch(() => false)) {
      worker.directUrl = url;
      return true;
    }
  }
  return false;
}

const TICKS_PER_SECOND = 100;

function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND; // utime + stime
  } catch {
    return NaN;
  }
}

/** CPU seconds used so far by the worker's runtime workerd and by wrangler's proxy workerd. */
export function workerCpu(worker: Worker): { runtime: number; proxy: number } {
  const { runtime, proxy } = runtimeAndProxy(worker);
  return { runtime: cpuSeconds(runtime?.pid), proxy: cpuSeconds(proxy?.pid) };
}

/**
 * Waits (at most `maxMs`) until the worker's runtime is nearly idle: work a warm-up set off in the
 * background (such as the real worker's `last_used_at` marks, handed to their shards)
 * then finishes before a measurement starts instead of landing in it. False when it was still busy at `maxMs`.
 */
export async function settle(worker: Worker, maxMs = 5000): Promise<boolean> {
  const started = Date.now();
  let quiet = 0;
  let last = workerCpu(worker).runtime;
  while (Date.now() - started < maxMs && quiet < 2) {
    await sleep(250);
    const now = workerCpu(worker).runtime;
    quiet = now - last <= 0.025 ? quiet + 1 : 0; // at most 10% of a core over 250 ms
    last = now;
  }
  return quiet >= 2;
}

// ---- Stopping ----------------------------------------------------------------------------------

/** Ends one worker (the others keep running). */
export const stopWorker = (worker: Worker, graceMs = 4000) => stopGroups([worker.pgid], graceMs);

/** Ends every worker's process group and every short-lived child. */
export async function stopAll(graceMs = 4000): Promise<void> {
  for (const child of running) signalGroup(child.pid, "SIGKILL");
  await stopGroups(
    workers.map((w) => w.pgid),
    graceMs,
  );
}

/** The synchronous last resort, for process exit. */
export function stopAllNow(): void {
  for (const child of running) signalGroup(child.pid, "SIGKILL");
  for (const worker of workers) signalGroup(worker.pgid, "SIGKILL");
}
