import { DAY_MS, HOUR_MS, MINUTE_MS } from "../../platform/time.ts";
import type { Granularity } from "../../rate-limit/types.ts";
import type { UsageCount, UsageSpan } from "./types.ts";

/** Bucket widths, and how many buckets each granularity keeps: 24 h of minutes, 30 days of hours, a year of days. */
export const BUCKET_MS: Record<Granularity, number> = { minute: MINUTE_MS, hour: HOUR_MS, day: DAY_MS };
const KEPT_BUCKETS: Record<Granularity, number> = { minute: 1440, hour: 720, day: 365 };

export const bucketStart = (at: number, granularity: Granularity) => at - (at % BUCKET_MS[granularity]);

/** The buckets a granularity keeps at `now`: the current one and those before it, `from` ≤ start < `to`. */
export function keptWindow(granularity: Granularity, now: number): { from: number; to: number } {
  const current = bucketStart(now, granularity);
  return { from: current - (KEPT_BUCKETS[granularity] - 1) * BUCKET_MS[granularity], to: current + BUCKET_MS[granularity] };
}

/**
 * The asked range (epoch ms; either end may be open) as whole buckets at `now` (the bucket holding `from`, up to
 * the one holding the instant before `to`), clipped to what the granularity keeps. Empty (`from` = `to`) when the
 * range lies outside it.
 */
export function clipRange(
  granularity: Granularity,
  { now, from, to }: { now: number; from: number | undefined; to: number | undefined },
): UsageSpan {
  const kept = keptWindow(granularity, now);
  const width = BUCKET_MS[granularity];
  const start = Math.max(kept.from, from === undefined ? kept.from : bucketStart(from, granularity));
  const end = Math.min(kept.to, to === undefined ? kept.to : bucketStart(to - 1, granularity) + width);
  return { granularity, from: start, to: Math.max(start, end) };
}

/** Every bucket of the span, oldest first, zeros where nothing was counted. */
export function zeroFilled({ granularity, from, to }: UsageSpan, counted: readonly UsageCount[]): UsageCount[] {
  const byStart = new Map(counted.map((c) => [c.start, c]));
  const out: UsageCount[] = [];
  for (let start = from; start < to; start += BUCKET_MS[granularity])
    out.push(byStart.get(start) ?? { start, admitted: 0, refused: 0, uncertain: 0 });
  return out;
}

/** Several keys' buckets of the same span, added bucket by bucket (zeros when there are none). */
export function summed(span: UsageSpan, series: readonly UsageCount[][]): UsageCount[] {
  const total = zeroFilled(span, []);
  for (const buckets of series) {
    buckets.forEach((bucket, i) => {
      total[i]!.admitted += bucket.admitted;
      total[i]!.refused += bucket.refused;
      total[i]!.uncertain += bucket.uncertain;
    });
  }
  return total;
}
