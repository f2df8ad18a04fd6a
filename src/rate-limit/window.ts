import { DAY_MS, HOUR_MS, MINUTE_MS } from "../platform/time.ts";
import type { Decision, Limits } from "./types.ts";

/** A fixed-window counter, used for the hour and day quotas. */
export interface Counter {
  start: number;
  count: number;
}

/** The columns a bucket's counters are kept in, in its object's one row (a fixed bucket's or a key's). */
export interface StoredCounters {
  log: string;
  hour_start: number;
  hour_count: number;
  day_start: number;
  day_count: number;
}

/**
 * The usage of one bucket: an exact log of the admitted requests of the last minute (oldest first,
 * never more entries than the largest limit it has had) and hour and day counters.
 * Pure: the Durable Object persists what `decide` changes.
 */
export class Usage {
  constructor(
    readonly minuteLog: number[] = [],
    public hour: Counter = { start: 0, count: 0 },
    public day: Counter = { start: 0, count: 0 },
  ) {}

  /** The usage a stored row holds; an empty one for no row. */
  static restored(row: StoredCounters | undefined): Usage {
    if (!row) return new Usage();
    const log = JSON.parse(row.log) as number[];
    return new Usage(log, { start: row.hour_start, count: row.hour_count }, { start: row.day_start, count: row.day_count });
  }

  /** Drops the log entries that have left the minute; returns how many, so storage can follow. */
  slide(now: number): number {
    let gone = 0;
    while (gone < this.minuteLog.length && this.minuteLog[gone]! <= now - MINUTE_MS) gone++;
    this.minuteLog.splice(0, gone);
    const hourStart = now - (now % HOUR_MS);
    if (this.hour.start !== hourStart) this.hour = { start: hourStart, count: 0 };
    const dayStart = now - (now % DAY_MS);
    if (this.day.start !== dayStart) this.day = { start: dayStart, count: 0 };
    return gone;
  }

  /**
   * Counts `count` admissions as made at `at` (no earlier than anything counted), whatever the limits: what a key's
   * object must assume on a wake of the admissions a block it wrote may have made (src/api-keys/object/reservations.ts).
   */
  assumeMade(at: number, count: number): void {
    this.slide(at);
    for (let i = 0; i < count; i++) this.minuteLog.push(at);
    this.hour.count += count;
    this.day.count += count;
  }

  /** Decides and, when the request is admitted, counts it. Call `slide(now)` first. */
  decide(now: number, limits: Limits): Decision {
    const before = this.windows(now, limits);
    const refusing = before.filter((w) => w.remaining === 0);
    if (refusing.length > 0) {
      // The quota that makes the caller wait longest; on a tie, the longer period, which says more.
      const binding = refusing.reduce((a, b) => (b.resetMs >= a.resetMs ? b : a));
      return {
        allowed: false,
        limits,
        remaining: 0,
        resetSeconds: seconds(binding.resetMs),
        resetMs: binding.resetMs,
        exceeded: binding.period,
      };
    }
    this.minuteLog.push(now);
    this.hour.count++;
    this.day.count++;
    const after = this.windows(now, limits);
    const remaining = Math.min(...after.map((w) => w.remaining));
    const exhausted = after.filter((w) => w.remaining === 0);
    const resetMs = exhausted.length > 0 ? Math.max(...exhausted.map((w) => w.resetMs)) : after[0]!.resetMs;
    return { allowed: true, limits, remaining, resetSeconds: seconds(resetMs), resetMs };
  }

  private windows(now: number, limits: Limits) {
    const log = this.minuteLog;
    // The entry whose leaving frees a slot: the oldest, or further in when a downgrade left the log over the limit.
    const freeing = log[Math.max(0, log.length - limits.per_minute)];
    return [
      {
        period: "minute" as const,
        remaining: Math.max(0, limits.per_minute - log.length),
        resetMs: freeing === undefined ? 0 : freeing + MINUTE_MS - now,
      },
      { period: "hour" as const, remaining: Math.max(0, limits.per_hour - this.hour.count), resetMs: this.hour.start + HOUR_MS - now },
      { period: "day" as const, remaining: Math.max(0, limits.per_day - this.day.count), resetMs: this.day.start + DAY_MS - now },
    ];
  }
}

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));
