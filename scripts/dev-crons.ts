/**
 * The cron triggers under `npm run dev`: `wrangler dev` runs none of them (it only says how to run one by hand), so
 * expiry notices, the outbox's sweep and the archives would never happen locally. scripts/dev.ts starts this once the
 * worker answers: at the start of each UTC minute, each of wrangler.toml's `[triggers] crons` that matches it is run
 * through the local runtime's own trigger, `/cdn-cgi/local/scheduled?cron=…&time=…` (what `curl` would call), as
 * Cloudflare runs it. A run still going when its cron matches again is not started twice. The expressions are read
 * by croner (docs/dependencies.md); one it cannot read is named when the script starts and not run locally.
 */
import { readFileSync } from "node:fs";
import { Cron } from "croner";

/** The `crons` of wrangler.toml's `[triggers]` table. */
export function cronsOf(toml: string): string[] {
  const triggers = /^\[triggers\][^[]*?^crons\s*=\s*\[([^\]]*)\]/ms.exec(toml)?.[1];
  return triggers === undefined ? [] : [...triggers.matchAll(/"([^"]*)"/g)].map((match) => match[1]!);
}

/** A cron expression as Cloudflare reads it (UTC); throws, naming the field, on one it cannot read. */
export const parseCron = (cron: string) => new Cron(cron, { timezone: "UTC", paused: true });

/** Whether the schedule runs in the UTC minute that `at` falls in. */
export const runsAt = (schedule: Cron, at: Date) => schedule.match(new Date(Math.floor(at.getTime() / 60_000) * 60_000));

/**
 * Runs wrangler.toml's crons against the worker at `api` until the process ends; returns what it runs, for the banner.
 * `log` hears of a cron it cannot read and of a run that failed (the worker's own log says why).
 */
export function runCrons(
  api: string,
  log: (line: string) => void,
  toml = readFileSync(new URL("../wrangler.toml", import.meta.url), "utf8"),
) {
  const schedules: Cron[] = [];
  for (const cron of cronsOf(toml)) {
    try {
      schedules.push(parseCron(cron));
    } catch (error) {
      log(`Cron ${error instanceof Error ? error.message : String(error)}; it does not run under npm run dev.`);
    }
  }
  const running = new Set<string>();
  const tick = () => {
    const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
    for (const schedule of schedules) {
      const cron = schedule.getPattern()!;
      if (!runsAt(schedule, minute) || running.has(cron)) continue;
      running.add(cron);
      const url = `${api}/cdn-cgi/local/scheduled?cron=${encodeURIComponent(cron)}&time=${minute.getTime()}`;
      fetch(url)
        .then(async (res) => {
          if (!res.ok) log(`Cron "${cron}" failed (${res.status} ${(await res.text()).trim()}); the worker's log above says why.`);
        })
        .catch((error: unknown) => log(`Cron "${cron}" could not reach the worker: ${String(error)}`))
        .finally(() => running.delete(cron));
    }
    setTimeout(tick, 60_000 - (Date.now() % 60_000)).unref();
  };
  setTimeout(tick, 60_000 - (Date.now() % 60_000)).unref();
  return schedules.map((schedule) => schedule.getPattern()!);
}
