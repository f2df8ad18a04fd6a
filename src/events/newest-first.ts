import { and, desc, eq, inArray, isNull, lt, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { eventArchive, events, WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";
import { type ArchivedEvent, type ArchiveRange, archivedColumns, archivedThrough } from "./archive.ts";
import { archiveFirstSeqSince, firstSeqSince, readArchive, type ScanResult } from "./archive-read.ts";

/**
 * The catalogue's events newest first (MCP's recent_changes: an agent asking for recent changes gets the most
 * recent), across D1 (the newest) and the archive (older), as scanEvents reads them oldest first. Every read is
 * an index range bounded both ways: below by `since` (sought through the timestamp indexes, as scanEvents does),
 * above by the cursor's seq.
 */
export interface NewestFirstScan {
  /** Events before this seq (the cursor's), all when absent ... */
  beforeSeq?: number | undefined;
  /** ... at or after this instant ... */
  since: string;
  types?: readonly string[] | undefined;
  /** ... at most this many ... */
  want: number;
  /** ... reading at most this many archive objects. */
  archiveReads: number;
  /** An archive object already read (the cursor's). */
  cached?: { range: ArchiveRange; events: ArchivedEvent[] } | undefined;
}

export async function scanEventsNewestFirst(db: Database, bucket: R2Bucket, scan: NewestFirstScan): Promise<ScanResult> {
  const { since, want } = scan;
  const before = scan.beforeSeq ?? Number.MAX_SAFE_INTEGER;
  const types = scan.types && WEBHOOK_EVENT_TYPES.every((type) => scan.types!.includes(type)) ? undefined : scan.types;
  const [recent, ranges] = await db.batch([
    db
      .select(archivedColumns)
      .from(events)
      .where(
        and(
          lt(events.seq, before),
          sql`${events.seq} > max(${archivedThrough}, ${firstSeqSince(since)} - 1)`,
          isNull(events.accountId), // account events are their account's alone
          sql`${events.timestamp} >= ${since}`,
          types ? (types.length === 1 ? eq(events.type, types[0]!) : inArray(events.type, [...types])) : undefined,
        ),
      )
      .orderBy(desc(events.seq))
      .limit(want),
    db
      .select()
      .from(eventArchive)
      .where(
        and(
          lt(eventArchive.firstSeq, before),
          sql`${eventArchive.firstSeq} >= ${archiveFirstSeqSince(since)}`,
          sql`${eventArchive.maxTimestamp} >= ${since}`,
        ),
      )
      .orderBy(desc(eventArchive.firstSeq))
      .limit(scan.archiveReads + 1), // one more than it may read: whether any is left unread
  ]);
  const found: ArchivedEvent[] = [...recent];
  if (found.length === want) return { events: found, stoppedAt: null };
  const matches = (event: ArchivedEvent) => event.seq < before && event.timestamp >= since && (!types || types.includes(event.type));
  let examined: ArchivedEvent | null = null;
  for (const range of ranges.slice(0, scan.archiveReads)) {
    const archived = scan.cached?.range.firstSeq === range.firstSeq ? scan.cached.events : await readArchive(bucket, range);
    for (const event of archived.toReversed()) {
      examined = event;
      if (!matches(event)) continue;
      found.push(event);
      if (found.length === want) return { events: found, stoppedAt: null };
    }
  }
  // Objects are left unread: stop here, resumable before the last (oldest) event looked at.
  return { events: found, stoppedAt: ranges.length > scan.archiveReads ? examined : null };
}
