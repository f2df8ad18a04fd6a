/**
 * `npm run dev`: everything a newcomer needs, in one command.
 *   1. .dev.vars from .dev.vars.example when missing (the local IdP's settings);
 *   2. the local D1 migrated (wrangler d1 migrations apply DB --local) and, the first time, seeded;
 *   3. the local IdP on http://127.0.0.1:4000;
 *   4. the worker on http://127.0.0.1:8787 (extra arguments go to `wrangler dev`, e.g. --var NAME:VALUE).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { appendFileSync, copyFileSync, existsSync, readFileSync } from "node:fs";

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
  const missing = readFileSync(".dev.vars.example", "utf8").split("\n").filter((line) => /^[A-Z_]+=/.test(line) && !have.has(line.split("=")[0]!));
  if (missing.length > 0) {
    appendFileSync(".dev.vars", `\n${missing.join("\n")}\n`);
    console.log(`Added to .dev.vars from .dev.vars.example: ${missing.map((line) => line.split("=")[0]).join(", ")}.`);
  }
}

function run(command: string, args: string[]) {
  const result = spawnSync(command, args, { stdio: "inherit", env: { ...process.env, CI: "true" } });
  if (result.status !== 0) {
    console.error(`\`${command} ${args.join(" ")}\` failed; see above.`);
    process.exit(result.status ?? 1);
  }
}

run("wrangler", ["d1", "migrations", "apply", "DB", "--local"]);
// The first run seeds the sample catalogue; later runs keep what is there (`npm run seed` re-seeds).
if (!existsSync(".wrangler/seed.sql")) run("node", ["scripts/seed.ts"]);

const children: ChildProcess[] = [
  spawn("node", ["scripts/idp.ts"], { stdio: "inherit" }),
  spawn("wrangler", ["dev", "--ip", "127.0.0.1", "--port", "8787", ...process.argv.slice(2)], { stdio: "inherit" }),
];

function stop(code = 0) {
  for (const child of children) child.kill("SIGTERM");
  process.exit(code);
}
process.on("SIGINT", () => stop());
process.on("SIGTERM", () => stop());
for (const child of children) child.on("exit", (code) => stop(code ?? 0));
