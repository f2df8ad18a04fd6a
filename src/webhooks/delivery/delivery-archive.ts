import { asc, sql } from "drizzle-orm";
import pLimit from "p-limit";
import {
  DELIVERIES_IN_D1_MS,
  DELIVERY_ARCHIVE_AFTER_MS,
  DELIVERY_ARCHIVE_PAGE,
  DELIVERY_ARCHIVE_ROWS_PER_RUN,
  DELIVERY_ARCHIVE_SCAN_ROWS,
  DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN,
  DELIVERY_LISTING_ARCHIVE_READS,
  DELIVERY_REPLAY_ARCHIVE_READS,
} from "../../events/retention.ts";
import { ApiError } from "../../http/errors.ts";
import { withCronLease } from "../../platform/cron-lease.ts";
import type { Database } from "../../platform/db.ts";
import { dueOwners } from "../../platform/due-owners.ts";
import { getNdjsonGz, mergeById, putNdjsonGz } from "../../platform/ndjson-archive.ts";
import { webhookDeliveries } from "../../platform/tables.ts";
import { HOUR_MS } from "../../platform/time.ts";
import type { DeliveryRow } from "../service.ts";
import { JITTER, RETRY_DELAYS_SECONDS } from "./schedule.ts";

/**
 * Webhook delivery attempts leave D1 for R2 (docs/scale.md): one row per attempt, ≈ 100 million a day at
 * the target load, would fill D1 in hours. A cron run (its own trigger: its R2 writes get their own
 * invocation's subrequests) takes the webhooks whose oldest attempt in D1 is DELIVERY_ARCHIVE_AFTER_MS old
 * and moves each one's attempts older than DELIVERIES_IN_D1_MS into gzip NDJSON objects under
 * `deliveries/<webhook id>/`, a page of D1 rows at a time. A step writes R2 first, then deletes those rows
 * from D1: a crash between the two leaves rows in both places, which every reader merges by id, and the
 * next run moves them again (overwriting the same key, or writing one more object the readers merge).
 *
 * A key names its object's span, newest first in R2's ascending listing:
 * `deliveries/<webhook id>/<9999999999999 − last attempt ms>-<first attempt ms>-<first id>.ndjson.gz`, so
 * "the latest attempts" is the first keys of a listing, and a time range is a prefix of it. Objects expire
 * by the bucket's lifecycle rule (docs/scale.md), after the events they are about.
 */

/** The delivery archive's cron trigger (wrangler.toml lists it beside the every-minute sweeps' "* * * * *"). */
export const DELIVERY_ARCHIVE_CRON = "*/1 * * * *";

const LAST_MS = 9_999_999_999_999;
const digits = (n: number) => String(n).padStart(13, "0");
export const deliveryArchivePrefix = (webhookId: string) => `deliveries/${webhookId}/`;

const deliveryArchiveKey = (webhookId: string, rows: readonly DeliveryRow[]) => {
  const times = rows.map((row) => Date.parse(row.deliveredAt));
  const inverted = digits(LAST_MS - Math.max(...times)); // R2 lists keys in ascending order: the newest span first
  return `${deliveryArchivePrefix(webhookId)}${inverted}-${digits(Math.min(...times))}-${rows[0]!.id}.ndjson.gz`;
};

/** The span of attempt times a key names. */
function spanOf(key: string): { first: number; last: number } {
  const [inverted, first] = key.slice(key.lastIndexOf("/") + 1).split("-");
  return { first: Number(first), last: LAST_MS - Number(inverted) };
}

/** Attempts of an event are made within this long of the first: the retry schedule at its longest jitter, and a margin for the queue. */
export const ATTEMPTS_SPAN_MS = RETRY_DELAYS_SECONDS.reduce((sum, delay) => sum + delay, 0) * (1 + JITTER) * 1000 + HOUR_MS;

const iso = (ms: number) => new Date(ms).toISOString();
const newestFirst = (a: DeliveryRow, b: DeliveryRow) => b.id - a.id;

/**
 * Moves the due webhooks' old attempts to R2, in bounded steps, holding the task's lease (none moved when another run
 * holds it). Returns how many left D1.
 */
export function archiveDeliveries(db: Database, bucket: R2Bucket, now = Date.now()): Promise<number> {
  return withCronLease(db, "delivery-archive", 0, () => moveDeliveries(db, bucket, now));
}

async function moveDeliveries(db: Database, bucket: R2Bucket, now: number): Promise<number> {
  const due = iso(now - DELIVERY_ARCHIVE_AFTER_MS);
  const keep = iso(now - DELIVERIES_IN_D1_MS);
  // The log's oldest attempt first: ids follow the order attempts are recorded, so when it is not due nothing is (but an
  // attempt a queue batch recorded minutes late, moved a few runs later), and the run reads one row whatever the log holds.
  const first = await db
    .select({ deliveredAt: webhookDeliveries.deliveredAt })
    .from(webhookDeliveries)
    .orderBy(asc(webhookDeliveries.id))
    .limit(1)
    .get();
  if (!first || first.deliveredAt >= due) return 0;
  const webhookIds = await dueOwners(
    db,
    { table: webhookDeliveries, id: webhookDeliveries.id, owner: webhookDeliveries.webhookId, at: webhookDeliveries.deliveredAt },
    { due, scan: DELIVERY_ARCHIVE_SCAN_ROWS, owners: DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN },
  );
  if (webhookIds.length === 0) return 0;
  const ids = JSON.stringify(webhookIds);
  // Six at a time: a Worker's simultaneous outgoing connections.
  const limit = pLimit(6);
  let moved = 0;
  let after = { webhookId: "", id: 0 };
  while (moved < DELIVERY_ARCHIVE_ROWS_PER_RUN) {
    // A page in (webhook, id) order, through the (webhook_id, id) index: a webhook's rows are together.
    const page = await db
      .select()
      .from(webhookDeliveries)
      .where(
        sql`${webhookDeliveries.webhookId} IN (SELECT value FROM json_each(${ids})) AND ${webhookDeliveries.deliveredAt} < ${keep}
          AND (${webhookDeliveries.webhookId}, ${webhookDeliveries.id}) > (${after.webhookId}, ${after.id})`,
      )
      .orderBy(asc(webhookDeliveries.webhookId), asc(webhookDeliveries.id))
      .limit(Math.min(DELIVERY_ARCHIVE_PAGE, DELIVERY_ARCHIVE_ROWS_PER_RUN - moved));
    if (page.length === 0) break;
    const groups = new Map<string, DeliveryRow[]>();
    for (const row of page) {
      if (!groups.has(row.webhookId)) groups.set(row.webhookId, []);
      groups.get(row.webhookId)!.push(row);
    }
    const written = await Promise.allSettled(
      [...groups].map(([webhookId, rows]) =>
        limit(async () => {
          await putNdjsonGz(bucket, deliveryArchiveKey(webhookId, rows), rows);
          return rows.map((row) => row.id);
        }),
      ),
    );
    // Only rows now safely in R2 leave D1; a failed group's rows stay for the next run.
    const done = written.flatMap((result) => (result.status === "fulfilled" ? result.value : []));
    if (done.length > 0)
      await db.delete(webhookDeliveries).where(sql`${webhookDeliveries.id} IN (SELECT value FROM json_each(${JSON.stringify(done)}))`);
    moved += done.length;
    const failed = written.find((result): result is PromiseRejectedResult => result.status === "rejected");
    if (failed) throw failed.reason;
    const last = page.at(-1)!;
    after = { webhookId: last.webhookId, id: last.id };
  }
  return moved;
}

/** Keys of a webhook's archive objects whose span meets [from, to] (ms), newest first; at most max + 1 (more than max). */
async function keysBetween(
  bucket: R2Bucket,
  { webhookId, from, to, max }: { webhookId: string; from: number; to: number; max: number },
): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const listed = await bucket.list({ prefix: deliveryArchivePrefix(webhookId), cursor });
    for (const { key } of listed.objects) {
      const span = spanOf(key);
      if (span.last < from) return keys;
      if (span.first > to) continue;
      keys.push(key);
      if (keys.length > max) return keys;
    }
    if (!listed.truncated) return keys;
    cursor = listed.cursor;
  }
}

/**
 * The webhook's latest `want` attempts, newest first: D1's, then (when D1 has fewer) the newest archive
 * objects', at most DELIVERY_LISTING_ARCHIVE_READS of them.
 */
export async function latestAttempts(
  bucket: R2Bucket,
  { webhookId, inD1, want }: { webhookId: string; inD1: readonly DeliveryRow[]; want: number },
): Promise<DeliveryRow[]> {
  if (inD1.length >= want) return inD1.slice(0, want);
  const listed = await bucket.list({ prefix: deliveryArchivePrefix(webhookId), limit: DELIVERY_LISTING_ARCHIVE_READS });
  let rows = [...inD1];
  for (const object of listed.objects) {
    rows = mergeById([rows, await getNdjsonGz<DeliveryRow>(bucket, object.key)], newestFirst);
    if (rows.length >= want) break;
  }
  return rows.slice(0, want);
}

/**
 * The webhook's archived attempts made in [from, to] (ISO times), one archive object's at a time (newest object first), so
 * a caller that folds each into what it needs holds one object, never the span's; at most DELIVERY_REPLAY_ARCHIVE_READS
 * objects (else 400: the caller's span is too long to judge). An attempt in two objects (a crash between an archive
 * write and its D1 delete) comes twice: what the caller folds must not count it twice.
 */
export async function* archivedAttempts(
  bucket: R2Bucket,
  { webhookId, from, to }: { webhookId: string; from: string; to: string },
): AsyncGenerator<DeliveryRow[]> {
  const keys = await keysBetween(bucket, { webhookId, from: Date.parse(from), to: Date.parse(to), max: DELIVERY_REPLAY_ARCHIVE_READS });
  if (keys.length > DELIVERY_REPLAY_ARCHIVE_READS)
    throw new ApiError(
      400,
      `Invalid body: since: only_failed would read more than ${DELIVERY_REPLAY_ARCHIVE_READS} archive objects of ` +
        `this webhook's delivery attempts; replay a shorter or more recent span.`,
    );
  for (const key of keys) {
    const rows = await getNdjsonGz<DeliveryRow>(bucket, key);
    yield rows.filter((row) => row.deliveredAt >= from && row.deliveredAt <= to);
  }
}
