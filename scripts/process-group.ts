/**
 * Child processes that each lead a process group of their own, so that stopping one also stops what it
 * started (wrangler's workerd processes): shared by `npm run dev` (scripts/dev.ts), `npm run bench`
 * (bench/harness/processes.ts) and the browser test (test/e2e/dashboard.test.ts).
 */
import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** wrangler quiet and non-interactive, whatever the calling shell has set. */
export const WRANGLER_ENV = { CI: "true", WRANGLER_SEND_METRICS: "false" };

/** `command` as the leader of a new process group, with WRANGLER_ENV and `env` over this process's environment. */
export function spawnGroup(
  command: string,
  args: readonly string[],
  options: Omit<SpawnOptions, "detached" | "env"> & { env?: Record<string, string> },
): ChildProcess {
  const { env, ...rest } = options;
  return spawn(command, args, { ...rest, detached: true, env: { ...process.env, ...WRANGLER_ENV, ...env } });
}

/** Sends `signal` to the whole group `pgid` (the leader's pid); a group already gone is no error. */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** TERM to every group, then KILL to whatever is left of them after `graceMs`. */
export async function stopGroups(pgids: readonly (number | undefined)[], graceMs: number): Promise<void> {
  const groups = pgids.filter((pgid): pgid is number => pgid !== undefined);
  for (const pgid of groups) signalGroup(pgid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (groups.some(groupAlive) && Date.now() < deadline) await sleep(100);
  for (const pgid of groups) signalGroup(pgid, "SIGKILL");
}
