import { and, eq, gte, or, sql } from "drizzle-orm";
import pLimit from "p-limit";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import type { Database } from "../platform/db.ts";
import { apiKeys } from "../platform/tables.ts";
import type { RateLimitControl, UsageCount } from "../rate-limit/types.ts";
import { BUCKET_MS, clipRange, summed, zeroFilled } from "../rate-limit/usage-range.ts";
import type { AccountUsageView, KeyUsageView, UsageQuery } from "./schema.ts";
import { findApiKey } from "./service.ts";

const range = (query: UsageQuery) =>
  clipRange(
    query.granularity,
    Date.now(),
    query.from === undefined ? undefined : Date.parse(query.from),
    query.to === undefined ? undefined : Date.parse(query.to),
  );

const wire = (buckets: UsageCount[]) =>
  buckets.map((b) => ({ start: new Date(b.start).toISOString(), admitted: b.admitted, refused: b.refused }));

/** One key's usage, from its own object; another account's key is 404. */
export async function keyUsage(
  db: Database,
  limiter: RateLimitControl,
  accountId: string,
  keyId: string,
  query: UsageQuery,
): Promise<KeyUsageView> {
  const key = await findApiKey(db, accountId, keyId);
  const { from, to } = range(query);
  const counted = from < to ? await limiter.usage(key.keyHash, query.granularity, from, to) : [];
  return { key_id: key.id, granularity: query.granularity, buckets: wire(zeroFilled(query.granularity, from, to, counted)) };
}

/**
 * The sum of the account's keys that can have something in the range: the active ones, and those used,
 * revoked or expired since a minute before it starts (`last_used_at` lags use by up to a minute).
 * A key revoked or expired before the range and not admitted since is left out: whatever it was refused
 * in the range is on its own usage, not in the total.
 */
export async function accountUsage(
  db: Database,
  limiter: RateLimitControl,
  accountId: string,
  query: UsageQuery,
): Promise<AccountUsageView> {
  const { from, to } = range(query);
  const since = new Date(from - BUCKET_MS.minute).toISOString();
  const keys =
    from < to
      ? await db
          .select({ keyHash: apiKeys.keyHash })
          .from(apiKeys)
          .where(
            and(
              eq(apiKeys.accountId, accountId),
              or(
                and(eq(apiKeys.status, "active"), sql`(${apiKeys.expiresAt} IS NULL OR ${apiKeys.expiresAt} >= ${since})`),
                gte(apiKeys.lastUsedAt, since),
                gte(apiKeys.revokedAt, since),
              ),
            ),
          )
          .all()
      : [];
  const limit = pLimit(MAX_OPEN_CONNECTIONS);
  const series = await Promise.all(
    keys.map(({ keyHash }) =>
      limit(async () => zeroFilled(query.granularity, from, to, await limiter.usage(keyHash, query.granularity, from, to))),
    ),
  );
  return { account_id: accountId, granularity: query.granularity, buckets: wire(summed(query.granularity, from, to, series)) };
}
