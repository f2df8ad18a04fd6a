/**
 * The cron triggers under `npm run dev`: `wrangler dev` runs none of them (it only says how to run one by hand), so
 * expiry notices, the outbox's sweep and the archives would never happen locally. scripts/dev.ts starts this once the
 * worker answers: at the start of each UTC minute, each of wrangler.toml's `[triggers] crons` that matches it is run
 * through the local runtime's own trigger, `/cdn-cgi/local/scheduled?cron=…&time=…` (what `curl` would call), as
 * Cloudflare runs it. A run still going when its cron matches again is not started twice.
 *
 * The expressions are the five-field kind wrangler.toml holds: `*`, numbers, ranges, lists and steps (`1-30/2`, `0/15`,
 * or a step after `*`);
 * month and weekday names; a weekday of 7 is Sunday. Quartz's `L`, `W` and `#` are refused by name when the script
 * starts (the cron is then not run locally), never misread.
 */
import { readFileSync } from "node:fs";

const FIELDS = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"] },
  { name: "day of week", min: 0, max: 7, names: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"] },
] as const;

/** The `crons` of wrangler.toml's `[triggers]` table. */
export function cronsOf(toml: string): string[] {
  const triggers = /^\[triggers\][^[]*?^crons\s*=\s*\[([^\]]*)\]/ms.exec(toml)?.[1];
  return triggers === undefined ? [] : [...triggers.matchAll(/"([^"]*)"/g)].map((match) => match[1]!);
}

interface Schedule {
  cron: string;
  /** Per field, the values it matches. */
  values: Set<number>[];
  /** Whether the day-of-month and day-of-week fields were restricted (not `*`): cron's "either day matches". */
  restricted: [dayOfMonth: boolean, dayOfWeek: boolean];
}

/** A cron expression read into the values each field matches; an error naming the field for what it cannot read. */
export function parseCron(cron: string): Schedule {
  const parts = cron.trim().split(/\s+/);
  if (parts.length !== 5) throw new Error(`"${cron}": expected 5 fields (minute hour day-of-month month day-of-week)`);
  const values = parts.map((part, i) => fieldValues(part, FIELDS[i]!, cron));
  // Sunday is 0 and 7.
  if (values[4]!.delete(7)) values[4]!.add(0);
  return { cron, values, restricted: [parts[2] !== "*", parts[4] !== "*"] };
}

function fieldValues(part: string, field: (typeof FIELDS)[number], cron: string): Set<number> {
  const value = (text: string) => {
    const named = "names" in field ? (field.names as readonly string[]).indexOf(text.toUpperCase()) : -1;
    const n = named >= 0 ? named + field.min : /^\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!(n >= field.min && n <= field.max))
      throw new Error(`"${cron}": the ${field.name} field's "${text}" is not ${field.min}–${field.max}`);
    return n;
  };
  const matched = new Set<number>();
  for (const item of part.split(",")) {
    const [range = "", stepText] = item.split("/");
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1)
      throw new Error(`"${cron}": the ${field.name} field's step "${stepText}" is not a whole number`);
    const [from, to] =
      range === "*"
        ? [field.min, field.max]
        : range.includes("-")
          ? range.split("-").map(value)
          : [value(range), stepText ? field.max : value(range)];
    if (from === undefined || to === undefined || from > to)
      throw new Error(`"${cron}": the ${field.name} field's "${item}" is not a range`);
    for (let n = from; n <= to; n += step) matched.add(n);
  }
  return matched;
}

/** Whether the schedule runs in the UTC minute that `at` falls in. */
export function runsAt({ values, restricted }: Schedule, at: Date): boolean {
  const [minutes, hours, days, months, weekdays] = values as [Set<number>, Set<number>, Set<number>, Set<number>, Set<number>];
  const day = days.has(at.getUTCDate());
  const weekday = weekdays.has(at.getUTCDay());
  // Both day fields restricted: either matches (cron's rule); one restricted: that one.
  const dayMatches = restricted[0] && restricted[1] ? day || weekday : day && weekday;
  return minutes.has(at.getUTCMinutes()) && hours.has(at.getUTCHours()) && months.has(at.getUTCMonth() + 1) && dayMatches;
}

/**
 * Runs wrangler.toml's crons against the worker at `api` until the process ends; returns what it runs, for the banner.
 * `log` hears of a cron it cannot read and of a run that failed (the worker's own log says why).
 */
export function runCrons(
  api: string,
  log: (line: string) => void,
  toml = readFileSync(new URL("../wrangler.toml", import.meta.url), "utf8"),
) {
  const schedules: Schedule[] = [];
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
      if (!runsAt(schedule, minute) || running.has(schedule.cron)) continue;
      running.add(schedule.cron);
      const url = `${api}/cdn-cgi/local/scheduled?cron=${encodeURIComponent(schedule.cron)}&time=${minute.getTime()}`;
      fetch(url)
        .then(async (res) => {
          if (!res.ok) log(`Cron "${schedule.cron}" failed (${res.status} ${(await res.text()).trim()}); the worker's log above says why.`);
        })
        .catch((error: unknown) => log(`Cron "${schedule.cron}" could not reach the worker: ${String(error)}`))
        .finally(() => running.delete(schedule.cron));
    }
    setTimeout(tick, 60_000 - (Date.now() % 60_000)).unref();
  };
  setTimeout(tick, 60_000 - (Date.now() % 60_000)).unref();
  return schedules.map((schedule) => schedule.cron);
}
