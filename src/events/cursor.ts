import { and, asc, eq, isNull, sql } from "drizzle-orm";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { eventIdTime } from "../platform/ids.ts";
import { eventArchive, events } from "../platform/tables.ts";
import { readArchive } from "./archive-read.ts";

/** A feed's cursor (`after`, an event id): where the next page starts, in D1 or in the archive (GET /events, GET /account/events). */

/** The answer to a cursor naming an event older than the retention, or unknown (GET /events, GET /account/events; a sandbox's feed keeps its events 7 days). */
export const cursorGone = (id: string, keptDays = 30) =>
  new ApiError(
    410,
    `Event ${id} is older than ${keptDays} days or unknown: events are kept ${keptDays} days. Start again with since (an ISO-8601 time) instead of after.`,
  );

/**
 * The seq of the event a cursor names: from D1, or from the archive object its id's timestamp falls in.
 * An event older than the retention, or unknown, is 410; so is an account's own event (an account or sandbox event,
 * which has an account): it is in no catalogue feed, and answering it as unknown tells no one that it exists.
 */
export async function cursorOf(
  db: Database,
  bucket: R2Bucket,
  { id, oldest, archiveReads }: { id: string; oldest: string; archiveReads: number },
) {
  const gone = () => cursorGone(id);
  const at = eventIdTime(id);
  const [inD1, candidates] = await db.batch([
    db
      .select({ seq: events.seq, timestamp: events.timestamp })
      .from(events)
      .where(and(eq(events.id, id), isNull(events.accountId))),
    db
      .select()
      .from(eventArchive)
      .where(sql`${eventArchive.maxTimestamp} >= ${at} AND ${eventArchive.maxTimestamp} >= ${oldest}`)
      .orderBy(asc(eventArchive.maxTimestamp))
      .limit(archiveReads),
  ]);
  const row = inD1[0];
  if (row) {
    if (row.timestamp < oldest) throw gone();
    return { seq: row.seq };
  }
  if (at < oldest) throw gone();
  for (const range of candidates.filter((candidate) => candidate.minTimestamp <= at)) {
    const archived = await readArchive(bucket, range);
    const event = archived.find((candidate) => candidate.id === id);
    if (event) return { seq: event.seq, cached: { range, events: archived } };
  }
  throw gone();
}
