import type { Granularity } from "../../rate-limit/types.ts";
import type { Assumed } from "./reservations.ts";
import type { UsageCount } from "./types.ts";
import { BUCKET_MS, bucketStart, keptWindow } from "./usage-range.ts";

/** The table's two levels: hours (with their minutes inside) and, once older than 30 days, days. */
const LEVEL = { hour: 1, day: 2 } as const;
type Level = keyof typeof LEVEL;
const LEVELS = ["hour", "day"] as const;

/** How long a row may outstay its window before a fold is due: folds come in batches, not on every decision. */
const FOLD_SLACK_MS = BUCKET_MS.day;

/**
 * A minute's counts: admitted, refused, and, when a wake assumed made admissions that may not have been
 * (src/api-keys/object/reservations.ts), how many of the admitted those are.
 */
type MinuteCounts = [admitted: number, refused: number, uncertain?: number];

/**
 * The current hour's counts, minute by minute (the minute's index in the hour → its counts, only minutes with
 * something counted): kept in the object's state row, and moved to the table as one row when the hour ends.
 */
export interface PendingHour {
  start: number;
  minutes: Record<string, MinuteCounts>;
}

/**
 * The usage table: created by the object's wake-up script (src/api-keys/object/key-object.ts) with its other tables.
 * An hour row, written when its hour ended, carries that hour's minutes as JSON (`minutes`, a PendingHour's); a day
 * row, folded from hours, carries none.
 */
export const USAGE_SCHEMA = `CREATE TABLE IF NOT EXISTS usage (level INTEGER NOT NULL, start INTEGER NOT NULL,
  admitted INTEGER NOT NULL, refused INTEGER NOT NULL, minutes TEXT, uncertain INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (level, start)) WITHOUT ROWID;`;
/** For a usage table made before blocks were reserved (issue 49). */
export const USAGE_UPGRADE = "ALTER TABLE usage ADD COLUMN uncertain INTEGER NOT NULL DEFAULT 0;";

/** The oldest row's start per level (null for none), as columns of the object's one wake-up read. */
export const OLDEST_COLUMNS = LEVELS.map((level) => `(SELECT min(start) FROM usage WHERE level = ${LEVEL[level]}) AS oldest_${level}`).join(
  ", ",
);
export type OldestColumns = Record<`oldest_${Level}`, number | null>;
const oldestPerLevel = (row: OldestColumns) => ({ hour: row.oldest_hour ?? Infinity, day: row.oldest_day ?? Infinity });

/**
 * A key's admitted and refused requests, in its object's SQLite, so an eviction loses none.
 * The current hour's counts travel in the object's one state row (src/api-keys/object/key-object.ts writes it with
 * each block it reserves, and with refusals); when a decision falls in a new hour, the finished one becomes one row
 * here, its minutes inside it, written with the state row. So an hour costs one row more, however the requests are
 * spread over it (until issue 34 each minute became a row, which the fold later deleted). Hours older than 30 days
 * are folded into days and days older than a year dropped, lazily: once the oldest row of a level is more than a day
 * past its window. Days hold only what hours no longer do, so a read adds the levels up and is exact whenever the
 * folding last ran.
 */
export class UsageLog {
  /** The oldest row's start per level (Infinity for none), so a decision knows without a query whether a fold is due. */
  private oldest: Record<Level, number>;

  constructor(
    private readonly sql: SqlStorage,
    /** Counted but not yet in the table; the caller persists it with its state. */
    public pending: PendingHour,
    oldest: OldestColumns,
  ) {
    this.oldest = oldestPerLevel(oldest);
  }

  /** One decision at `now`. True when it ended an hour, whose row it wrote: the caller writes its state row with it. */
  record(now: number, allowed: boolean): boolean {
    const { counts, hourEnded } = this.minuteAt(now);
    counts[allowed ? 0 : 1]++;
    return hourEnded;
  }

  /** Admissions a wake assumed made that may not have been: admitted, and marked uncertain. */
  assume({ at, count }: Assumed): void {
    const { counts } = this.minuteAt(at);
    counts[0] += count;
    counts[2] = (counts[2] ?? 0) + count;
  }

  private minuteAt(now: number): { counts: MinuteCounts; hourEnded: boolean } {
    const hour = bucketStart(now, "hour");
    let hourEnded = false;
    if (hour !== this.pending.start) {
      hourEnded = Object.keys(this.pending.minutes).length > 0;
      if (hourEnded) this.addHour(this.pending);
      this.pending = { start: hour, minutes: {} };
    }
    this.fold(now); // after the finished hour is in the table, so a fold takes it too if it is old
    const index = String(Math.floor((now - hour) / BUCKET_MS.minute));
    return { counts: (this.pending.minutes[index] ??= [0, 0]), hourEnded };
  }

  /** Buckets with something counted, `from` ≤ start < `to` (both aligned to `granularity`), oldest first. */
  read(granularity: Granularity, from: number, to: number): UsageCount[] {
    const width = BUCKET_MS[granularity];
    const buckets = new Map<number, UsageCount>();
    const add = (at: number, admitted: number, refused: number, uncertain: number) => {
      if (at < from || at >= to) return;
      const start = at - (at % width);
      const bucket = buckets.get(start);
      if (bucket) {
        bucket.admitted += admitted;
        bucket.refused += refused;
        bucket.uncertain += uncertain;
      } else buckets.set(start, { start, admitted, refused, uncertain });
    };
    // Minutes come from the hour rows' minutes (the 24 hours of minutes are all still hours); hours and days from the totals.
    const rows = this.sql.exec<{ start: number; admitted: number; refused: number; uncertain: number; minutes: string | null }>(
      "SELECT start, admitted, refused, uncertain, minutes FROM usage WHERE level <= ? AND start >= ? AND start < ?",
      granularity === "day" ? LEVEL.day : LEVEL.hour,
      from - (from % BUCKET_MS.hour),
      to,
    );
    for (const row of rows) {
      if (granularity !== "minute") add(row.start, row.admitted, row.refused, row.uncertain);
      else if (row.minutes !== null) this.addMinutes({ start: row.start, minutes: JSON.parse(row.minutes) as PendingHour["minutes"] }, add);
    }
    this.addMinutes(this.pending, add);
    return [...buckets.values()].sort((a, b) => a.start - b.start);
  }

  private addMinutes(hour: PendingHour, add: (at: number, admitted: number, refused: number, uncertain: number) => void) {
    for (const [index, [admitted, refused, uncertain = 0]] of Object.entries(hour.minutes))
      add(hour.start + Number(index) * BUCKET_MS.minute, admitted, refused, uncertain);
  }

  private addHour({ start, minutes }: PendingHour) {
    let admitted = 0;
    let refused = 0;
    let uncertain = 0;
    for (const counts of Object.values(minutes)) {
      admitted += counts[0];
      refused += counts[1];
      uncertain += counts[2] ?? 0;
    }
    this.oldest.hour = Math.min(this.oldest.hour, start);
    // An hour already written is met again only when the clock steps back (a host's correction, a test's fake
    // clock): its counts and minutes are then added to the stored ones, so none is lost or counted twice.
    this.sql.exec(
      `INSERT INTO usage (level, start, admitted, refused, uncertain, minutes) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (level, start) DO UPDATE SET admitted = admitted + excluded.admitted, refused = refused + excluded.refused,
         uncertain = uncertain + excluded.uncertain,
         minutes = (SELECT json_group_object(key, CASE WHEN uncertain > 0 THEN json_array(admitted, refused, uncertain)
             ELSE json_array(admitted, refused) END) FROM (
           SELECT key, sum(value ->> 0) AS admitted, sum(value ->> 1) AS refused, sum(coalesce(value ->> 2, 0)) AS uncertain
           FROM (SELECT key, value FROM json_each(usage.minutes) UNION ALL SELECT key, value FROM json_each(excluded.minutes))
           GROUP BY key))`,
      LEVEL.hour,
      start,
      admitted,
      refused,
      uncertain,
      JSON.stringify(minutes),
    );
  }

  private readOldest() {
    this.oldest = oldestPerLevel(this.sql.exec<OldestColumns>(`SELECT ${OLDEST_COLUMNS}`).one());
  }

  /** Folds and drops what is due; touches only rows that have left their window. */
  private fold(now: number) {
    const due = LEVELS.some((level) => this.oldest[level] < keptWindow(level, now).from - FOLD_SLACK_MS);
    if (!due) return;
    const before = keptWindow("hour", now).from;
    this.sql.exec(
      `INSERT INTO usage (level, start, admitted, refused, uncertain)
       SELECT ?, start - start % ?, sum(admitted), sum(refused), sum(uncertain) FROM usage WHERE level = ? AND start < ? GROUP BY 2
       ON CONFLICT (level, start) DO UPDATE SET admitted = admitted + excluded.admitted, refused = refused + excluded.refused,
         uncertain = uncertain + excluded.uncertain`,
      LEVEL.day,
      BUCKET_MS.day,
      LEVEL.hour,
      before,
    );
    this.sql.exec("DELETE FROM usage WHERE level = ? AND start < ?", LEVEL.hour, before);
    this.sql.exec("DELETE FROM usage WHERE level = ? AND start < ?", LEVEL.day, keptWindow("day", now).from);
    this.readOldest();
  }
}
