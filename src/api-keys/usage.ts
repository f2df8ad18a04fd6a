import { and, desc, eq, gte, or, sql } from "drizzle-orm";
import pLimit from "p-limit";
import type { RequestServices } from "../http/app-env.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import { apiKeys } from "../platform/tables.ts";
import { LAST_USED_LAG_MS } from "./object/last-used-schedule.ts";
import type { UsageCount } from "./object/types.ts";
import { clipRange, summed, zeroFilled } from "./object/usage-range.ts";
import type { AccountUsageQuery, AccountUsageView, KeyUsageView, UsageQuery } from "./schema.ts";
import { findApiKey, type KeyOfAccount, MAX_ACTIVE_KEYS } from "./service.ts";

const spanOf = (query: UsageQuery) =>
  clipRange(query.granularity, {
    now: Date.now(),
    from: query.from === undefined ? undefined : Date.parse(query.from),
    to: query.to === undefined ? undefined : Date.parse(query.to),
  });

/** `uncertain` only where a restart left some: a bucket is otherwise what it always was. */
const wire = (buckets: UsageCount[]) =>
  buckets.map(({ start, admitted, refused, uncertain }) => ({
    start: new Date(start).toISOString(),
    admitted,
    refused,
    ...(uncertain > 0 && { uncertain }),
  }));

/** One key's usage, from its own object; another account's key is 404. */
export async function getApiKeyUsage(
  { db, keyObjects }: Pick<RequestServices, "db" | "keyObjects">,
  { accountId, id, query }: KeyOfAccount & { query: UsageQuery },
): Promise<KeyUsageView> {
  const key = await findApiKey(db, { accountId, id });
  const span = spanOf(query);
  const counted = span.from < span.to ? await keyObjects.usage(key.keyHash, span) : [];
  return { key_id: key.id, granularity: query.granularity, buckets: wire(zeroFilled(span, counted)) };
}

/**
 * The sum of the account's keys that can have something in the range: the active ones, and those used,
 * revoked or expired since LAST_USED_LAG_MS before it starts (`last_used_at` lags use by up to that).
 * A key revoked or expired before the range and not admitted since is left out: whatever it was refused
 * in the range is on its own usage, not in the total. At most MAX_ACTIVE_KEYS objects are asked (the most
 * recently used first), however many keys an account has revoked or let expire: a request's calls stay bounded.
 */
export async function getAccountUsage(
  { db, keyObjects }: Pick<RequestServices, "db" | "keyObjects">,
  { accountId, query }: { accountId: string; query: AccountUsageQuery },
): Promise<AccountUsageView> {
  const span = spanOf(query);
  const since = new Date(span.from - LAST_USED_LAG_MS).toISOString();
  const keys =
    span.from < span.to
      ? await db
          .select({ keyHash: apiKeys.keyHash })
          .from(apiKeys)
          .where(
            and(
              eq(apiKeys.accountId, accountId),
              query.environment === undefined ? undefined : eq(apiKeys.environment, query.environment),
              or(
                and(eq(apiKeys.status, "active"), sql`(${apiKeys.expiresAt} IS NULL OR ${apiKeys.expiresAt} >= ${since})`),
                gte(apiKeys.lastUsedAt, since),
                gte(apiKeys.revokedAt, since),
              ),
            ),
          )
          .orderBy(desc(apiKeys.lastUsedAt)) // SQLite sorts NULL lowest: keys never used come last
          .limit(MAX_ACTIVE_KEYS)
          .all()
      : [];
  const limit = pLimit(MAX_OPEN_CONNECTIONS);
  const series = await Promise.all(keys.map(({ keyHash }) => limit(async () => zeroFilled(span, await keyObjects.usage(keyHash, span)))));
  return { account_id: accountId, granularity: query.granularity, buckets: wire(summed(span, series)) };
}
