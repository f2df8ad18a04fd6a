import type { Database } from "./db.ts";
import { MINUTE_MS } from "./time.ts";

/**
 * The archives move rows from D1 to R2 in steps that are safe after a crash but not beside another run of the same
 * task: two runs a minute apart (a slow run still going when the next one starts) read overlapping rows with
 * different clocks, write the same R2 object with different contents, and each deletes what it thinks it wrote, so
 * rows were archived twice or lost. Each archive therefore runs under a lease in D1 (`cron_leases`): a run claims
 * its task's row in one statement, or skips its turn when another run holds it (the next minute's run takes the work
 * up), and deletes the row when it ends, failed or not.
 *
 * A lease lasts longer than any run can: a scheduled invocation ends at 15 minutes of wall time (Workers limits,
 * https://developers.cloudflare.com/workers/platform/limits/), so a holder never outlives its lease, and a run
 * that died without releasing it holds its task back at most LEASE_MS.
 */
const LEASE_MS = 20 * MINUTE_MS;

export type LeasedTask = "events-archive" | "history-archive" | "delivery-archive";

/**
 * Runs `run` holding `task`'s lease and returns its result; returns `skipped` without running it when another run
 * holds the lease. Its statements go to the binding itself (`db.$client`), not through drizzle, so whatever wraps the
 * caller's `db` never keeps the lease from being taken or released.
 */
export async function withCronLease<T>(db: Database, task: LeasedTask, skipped: T, run: () => Promise<T>): Promise<T> {
  const holder = crypto.randomUUID();
  const now = Date.now();
  const claimed = await db.$client
    .prepare(
      `INSERT INTO cron_leases (task, holder, expires_at) VALUES (?1, ?2, ?3)
       ON CONFLICT (task) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at WHERE cron_leases.expires_at <= ?4
       RETURNING holder`,
    )
    .bind(task, holder, now + LEASE_MS, now)
    .first();
  if (!claimed) return skipped;
  try {
    return await run();
  } finally {
    await db.$client.prepare("DELETE FROM cron_leases WHERE task = ? AND holder = ?").bind(task, holder).run();
  }
}
