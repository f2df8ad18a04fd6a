/**
 * `npm run dev`: everything a newcomer needs, in one command.
 *   1. .dev.vars from .dev.vars.example when missing (the local IdP's settings);
 *   2. the local D1 databases migrated (wrangler d1 migrations apply DB --local, and ALERTS_DB, the alert windows' own;
 *      one line of summary each, wrangler's tables only when it fails) and, the first time, seeded;
 *   3. the local IdP on http://127.0.0.1:4000;
 *   4. the worker on http://127.0.0.1:8787 (extra arguments go to `wrangler dev`, e.g. --var NAME:VALUE;
 *      `--persist-to DIR` also puts the migrated and seeded D1 there, as the dev-server test does);
 *   5. once both answer and the catalogue's first snapshot serves, the addresses to open and the commands to try
 *      (wrangler's own start-up output held back until then: only its errors and warnings show before), and from then
 *      on wrangler.toml's crons on their schedules (scripts/dev-crons.ts), which `wrangler dev` does not run.
 */
import { type ChildProcess, type StdioOptions, spawnSync } from "node:child_process";
import { appendFileSync, copyFileSync, existsSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { runCrons } from "./dev-crons.ts";
import { DEV_AUDIENCE, DEV_ISSUER, devSigningKey } from "./dev-idp/config.ts";
import { mintToken } from "./mint-token.ts";
import { spawnGroup, stopGroups } from "./process-group.ts";

const root = new URL("..", import.meta.url).pathname;
process.chdir(root);

// Nothing here needs the network: no usage metrics, and the placeholder `request.cf` (the app reads none of it)
// instead of fetching the real one, which offline prints an ENOTFOUND stack trace on every start.
process.env.WRANGLER_SEND_METRICS ??= "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";

if (!existsSync(".dev.vars")) {
  copyFileSync(".dev.vars.example", ".dev.vars");
  console.log("Created .dev.vars from .dev.vars.example.");
} else {
  // A .dev.vars made before a variable was added gets that variable; values already set stay.
  const have = new Set(readFileSync(".dev.vars", "utf8").match(/^[A-Z_]+(?==)/gm));
  const missing = readFileSync(".dev.vars.example", "utf8")
    .split("\n")
    .filter((line) => /^[A-Z_]+=/.test(line) && !have.has(line.split("=")[0]!));
  if (missing.length > 0) {
    appendFileSync(".dev.vars", `\n${missing.join("\n")}\n`);
    console.log(`Added to .dev.vars from .dev.vars.example: ${missing.map((line) => line.split("=")[0]).join(", ")}.`);
  }
}

const wranglerDevArgs = process.argv.slice(2);
/** wrangler dev's `--persist-to DIR`, which the migrations and the seed then use too (the other arguments are wrangler's). */
const persistTo = parseArgs({ args: wranglerDevArgs, options: { "persist-to": { type: "string" } }, strict: false, allowPositionals: true })
  .values["persist-to"] as string | undefined;
const persist = persistTo ? ["--persist-to", persistTo] : [];

function run(command: string, args: string[], quiet = false) {
  const result = spawnSync(command, args, { stdio: quiet ? "pipe" : "inherit", encoding: "utf8", env: { ...process.env, CI: "true" } });
  if (result.status !== 0) {
    if (quiet) process.stdout.write(`${result.stdout}${result.stderr}`);
    console.error(`\`${command} ${args.join(" ")}\` failed; see above.`);
    process.exit(result.status ?? 1);
  }
  return result.stdout ?? "";
}

// Wrangler prints a table of every migration after each one it applies: say in one line what happened instead.
for (const [binding, dir, what] of [
  ["DB", "migrations", "Local D1"],
  ["ALERTS_DB", "migrations-alerts", "Local D1 of the alert windows"],
] as const) {
  const migrated = run("wrangler", ["d1", "migrations", "apply", binding, "--local", ...persist], true);
  const applied = /About to apply (\d+) migration/.exec(migrated)?.[1];
  console.log(applied ? `${what}: applied ${applied} migration(s) from ${dir}/.` : `${what}: migrations up to date.`);
}
// The first run seeds the sample catalogue; later runs keep what is there (`npm run seed` re-seeds).
const seedFile = persistTo ? `${persistTo}/seed.sql` : ".wrangler/seed.sql";
if (!existsSync(seedFile)) run("node", ["scripts/seed.ts", "--out", seedFile, ...persist]);

// Each child leads a process group of its own (scripts/process-group.ts), so stopping it stops what it started:
// wrangler's workerd too. Their groups are not the terminal's, so Ctrl-C reaches only this process, which stops them;
// package.json runs this script with `exec`, so a SIGTERM to `npm run dev` reaches it too (not only the shell npm starts).
// No stdin: a process outside the terminal's foreground group that read it would be stopped (SIGTTIN).
const stdio: StdioOptions = ["ignore", "inherit", "inherit"];
const wrangler = spawnGroup("wrangler", ["dev", "--ip", "127.0.0.1", "--port", "8787", ...wranglerDevArgs], {
  stdio: ["ignore", "pipe", "pipe"],
});
const children: ChildProcess[] = [spawnGroup("node", ["scripts/idp.ts"], { stdio }), wrangler];

/**
 * Until the banner, wrangler's output is held back: its bindings table (printed twice, as the first build's generated
 * assets make it build again) and the log of this script's own warm-up requests (a 503 while the first snapshot
 * builds) tell a newcomer nothing. Its errors and warnings pass at once; the rest is printed only if the worker never
 * comes up, to show why. After the banner everything passes through.
 */
let held: [NodeJS.WriteStream, Buffer][] | undefined = [];
const PASS_AT_ONCE = /\[ERROR\]|\[WARNING\]|✘|▲/;
/**
 * Notes that would be the first thing a newcomer reads, about what is so by choice: @cloudflare/workers-oauth-provider's
 * at load that Client ID Metadata Documents are off (they are: docs/dependencies.md), and wrangler's that cron triggers
 * do not run locally (here they do: scripts/dev-crons.ts runs them on their schedules).
 */
const CHOSEN = [
  /^.*CIMD \(Client ID Metadata Document\) is disabled.*\n?/gm,
  /^.*Scheduled Workers are not automatically triggered during local development\.[^\n]*\n(?:.*\n)*?.*cron-triggers\/#test-cron-triggers-locally.*\n?/gm,
];
for (const [from, to] of [
  [wrangler.stdout, process.stdout],
  [wrangler.stderr, process.stderr],
] as const) {
  from?.on("data", (raw: Buffer) => {
    let chunk = raw;
    const text = CHOSEN.reduce((rest, note) => rest.replace(note, ""), raw.toString());
    if (text !== raw.toString()) {
      if (text.trim() === "") return;
      chunk = Buffer.from(text);
    }
    if (held && !PASS_AT_ONCE.test(chunk.toString())) held.push([to, chunk]);
    else to.write(chunk);
  });
}
/** From now on wrangler's output passes through; `show` prints what was held back first. */
function release(show: boolean) {
  if (show) for (const [to, chunk] of held ?? []) to.write(chunk);
  held = undefined;
}

/** How long the children have to exit on SIGTERM before what is left of their groups is killed. */
const STOP_GRACE_MS = 3_000;
let stopping = false;
async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  await stopGroups(
    children.map((child) => child.pid),
    STOP_GRACE_MS,
  );
  process.exit(code);
}
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());
for (const child of children) child.on("exit", (code) => void stop(code ?? 0));

const API = "http://127.0.0.1:8787";
const IDP = "http://127.0.0.1:4000";

/** Polls `url` until it answers at all (any status); false after `seconds`. */
async function answers(url: string, seconds: number): Promise<boolean> {
  for (const deadline = Date.now() + seconds * 1000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 500))) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(10_000) });
      return true;
    } catch {
      // not listening yet
    }
  }
  return false;
}

/** The local account whose throwaway API key checks that the catalogue serves. */
const PROBE_ACCOUNT = "npm-run-dev";
const SNAPSHOT_WAIT_SECONDS = 120;

/**
 * Waits until GET /products answers 200, so the README's first catalogue call after the banner does
 * too: until the builder has built the seeded catalogue's first snapshot it answers 503 with
 * Retry-After (docs/catalogue.md), and the request itself is what has the builder start. Asks with an
 * API key made for the purpose (a Free key: 10 a minute, so a 429 is waited out) and revoked after.
 * Returns null once it serves, else what went wrong.
 */
async function firstSnapshotServes(seconds: number): Promise<string | null> {
  const login = {
    Authorization: `Bearer ${await mintToken(devSigningKey(), { issuer: DEV_ISSUER, audience: DEV_AUDIENCE, sub: PROBE_ACCOUNT })}`,
  };
  const created = await fetch(`${API}/api-keys`, {
    method: "POST",
    headers: login,
    body: JSON.stringify({ name: "npm run dev: first snapshot check" }),
  });
  if (created.status !== 201) return `POST /api-keys answered ${created.status}: ${await created.text()}`;
  const { id, key } = (await created.json()) as { id: string; key: string };
  try {
    for (const deadline = Date.now() + seconds * 1000; ; ) {
      const res = await fetch(`${API}/products`, { headers: { Authorization: `Bearer ${key}` } });
      await res.body?.cancel();
      if (res.status === 200) return null;
      if (res.status !== 503 && res.status !== 429) return `GET /products answered ${res.status}`;
      // Locally the default seed builds in well under a second: look again sooner than the 503's Retry-After says.
      const waitMs = res.status === 503 ? 1000 : Number(res.headers.get("Retry-After") ?? 60) * 1000;
      if (Date.now() + waitMs > deadline) return `GET /products still answered ${res.status} after ${seconds} s`;
      await sleep(waitMs);
    }
  } finally {
    await fetch(`${API}/api-keys/${id}`, { method: "DELETE", headers: login }).catch(() => undefined);
  }
}

// Once the worker and the IdP answer and the catalogue serves, say where everything is.
const up = (await answers(`${API}/`, 120)) && (await answers(`${IDP}/.well-known/openid-configuration`, 30));
const problem = up ? await firstSnapshotServes(SNAPSHOT_WAIT_SECONDS).catch((error: unknown) => String(error)) : null;
await sleep(250); // wrangler logs a request once it has answered it: the warm-up's last lines arrive while still held
release(!up || problem !== null);
if (up) {
  if (problem) {
    console.warn(`
  The catalogue is not serving yet (${problem}).
  GET /products answers 503 until the first snapshot of the seeded catalogue is built (a large seed takes
  about a second per 10,000 products; see the worker's log above). The rest of the API works meanwhile.`);
  }
  const crons = runCrons(API, (line) => console.warn(line));
  console.log(`
  Price Data API is running.
    API          ${API}/            (a JSON index of the routes)
    Dashboard    ${API}/dashboard   (sign in with any name and password)
    Reference    ${API}/docs        (OpenAPI document: ${API}/openapi.json)
    Local IdP    ${IDP}             (issuer of the account and admin tokens)
  In another terminal:
    TOKEN=$(npm run -s token -- alice)     an account login for "alice"
    ADMIN=$(npm run -s token -- --admin)   an admin token (accounts:write prices:write)
  The README's "Call it" section continues from there. Ctrl-C stops everything.
  Crons run on wrangler.toml's schedules (${crons.map((cron) => `"${cron}"`).join(", ")}): the outbox's sweep, expiry notices, the archives.
`);
}
