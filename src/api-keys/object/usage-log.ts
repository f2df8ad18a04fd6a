import type { Granularity } from "../../rate-limit/types.ts";
import type { UsageCount } from "./types.ts";
import { BUCKET_MS, bucketStart, keptWindow } from "./usage-range.ts";

const LEVEL: Record<Granularity, number> = { minute: 0, hour: 1, day: 2 };
const LEVELS = ["minute", "hour", "day"] as const;

/** How long a row may outstay its window before a fold is due: folds come in batches, not on every decision. */
const FOLD_SLACK_MS: Record<Granularity, number> = { minute: BUCKET_MS.hour, hour: BUCKET_MS.day, day: BUCKET_MS.day };

/** The current minute's counts: kept in the object's state row (one write per decision), moved to the table when the minute ends. */
export interface PendingMinute {
  minute: number;
  admitted: number;
  refused: number;
}

/** The usage table: created by the object's wake-up script (src/api-keys/object/key-object.ts) with its other tables. */
export const USAGE_SCHEMA = `CREATE TABLE IF NOT EXISTS usage (level INTEGER NOT NULL, start INTEGER NOT NULL,
  admitted INTEGER NOT NULL, refused INTEGER NOT NULL, PRIMARY KEY (level, start)) WITHOUT ROWID;`;

/** The oldest row's start per level (null for none), as columns of the object's one wake-up read. */
export const OLDEST_COLUMNS = LEVELS.map((_, level) => `(SELECT min(start) FROM usage WHERE level = ${level}) AS oldest_${level}`).join(
  ", ",
);
export type OldestColumns = Record<`oldest_${0 | 1 | 2}`, number | null>;
const oldestPerLevel = (row: OldestColumns) => LEVELS.map((_, level) => row[`oldest_${level as 0 | 1 | 2}`] ?? Infinity);

/**
 * A key's admitted and refused requests, in its object's SQLite, so an eviction loses none.
 * The current minute's counts travel in the object's one state row (src/api-keys/object/key-object.ts
 * writes it once per decision); when a decision falls in a new minute, the finished one becomes a row here.
 * Rows that have left their window are folded into the next coarser level (minutes older than 24 h into hours,
 * hours older than 30 days into days) and days older than a year are dropped, lazily: once the oldest row of a
 * level is more than its slack past the window (an hour for minutes, a day for hours and days). Each level holds
 * only what the finer ones no longer do,
 * so a read adds the levels up and is exact whenever the folding last ran.
 */
export class UsageLog {
  /** The oldest row's start per level (Infinity for none), so a decision knows without a query whether a fold is due. */
  private oldest: number[];

  constructor(
    private readonly sql: SqlStorage,
    /** Counted but not yet in the table; the caller persists it with its state. */
    public pending: PendingMinute,
    oldest: OldestColumns,
  ) {
    this.oldest = oldestPerLevel(oldest);
  }

  /** One decision at `now`. */
  record(now: number, allowed: boolean): void {
    const minute = bucketStart(now, "minute");
    if (minute !== this.pending.minute) {
      if (this.pending.admitted + this.pending.refused > 0) this.add(this.pending.minute, this.pending.admitted, this.pending.refused);
      this.pending = { minute, admitted: 0, refused: 0 };
    }
    this.fold(now); // after the finished minute is in the table, so a fold takes it too if it is old
    if (allowed) this.pending.admitted++;
    else this.pending.refused++;
  }

  /** Buckets with something counted, `from` ≤ start < `to` (both aligned to `granularity`), oldest first. */
  read(granularity: Granularity, from: number, to: number): UsageCount[] {
    const width = BUCKET_MS[granularity];
    const stored = this.sql
      .exec<{ start: number; admitted: number; refused: number }>(
        `SELECT start - start % ? AS start, sum(admitted) AS admitted, sum(refused) AS refused FROM usage
         WHERE level <= ? AND start >= ? AND start < ? GROUP BY 1 ORDER BY 1`,
        width,
        LEVEL[granularity],
        from,
        to,
      )
      .toArray();
    const { minute, admitted, refused } = this.pending;
    if (admitted + refused === 0 || minute < from || minute >= to) return stored;
    const start = minute - (minute % width);
    const bucket = stored.find((row) => row.start === start);
    if (bucket) {
      bucket.admitted += admitted;
      bucket.refused += refused;
      return stored;
    }
    return [...stored, { start, admitted, refused }].sort((a, b) => a.start - b.start);
  }

  private add(minute: number, admitted: number, refused: number) {
    this.oldest[0] = Math.min(this.oldest[0]!, minute);
    this.sql.exec(
      `INSERT INTO usage (level, start, admitted, refused) VALUES (0, ?, ?, ?)
       ON CONFLICT (level, start) DO UPDATE SET admitted = admitted + excluded.admitted, refused = refused + excluded.refused`,
      minute,
      admitted,
      refused,
    );
  }

  private readOldest() {
    this.oldest = oldestPerLevel(this.sql.exec<OldestColumns>(`SELECT ${OLDEST_COLUMNS}`).one());
  }

  /** Folds and drops what is due; touches only rows that have left their window. */
  private fold(now: number) {
    const due = LEVELS.some((level, i) => this.oldest[i]! < keptWindow(level, now).from - FOLD_SLACK_MS[level]);
    if (!due) return;
    for (const [finer, coarser] of [
      ["minute", "hour"],
      ["hour", "day"],
    ] as const) {
      const before = keptWindow(finer, now).from;
      this.sql.exec(
        `INSERT INTO usage (level, start, admitted, refused)
         SELECT ?, start - start % ?, sum(admitted), sum(refused) FROM usage WHERE level = ? AND start < ? GROUP BY 2
         ON CONFLICT (level, start) DO UPDATE SET admitted = admitted + excluded.admitted, refused = refused + excluded.refused`,
        LEVEL[coarser],
        BUCKET_MS[coarser],
        LEVEL[finer],
        before,
      );
      this.sql.exec("DELETE FROM usage WHERE level = ? AND start < ?", LEVEL[finer], before);
    }
    this.sql.exec("DELETE FROM usage WHERE level = ? AND start < ?", LEVEL.day, keptWindow("day", now).from);
    this.readOldest();
  }
}
