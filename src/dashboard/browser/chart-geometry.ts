/**
 * The usage chart's geometry, free of the DOM so it can be unit-tested (test/node/usage-chart.test.ts):
 * scales, "nice" axis ticks, time ticks on local boundaries, and the bars' widths.
 */

export interface Scale {
  (value: number): number;
  invert(pixel: number): number;
}

/** Maps [d0, d1] linearly onto [r0, r1]. */
export function linearScale(d0: number, d1: number, r0: number, r1: number): Scale {
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  const scale = ((value: number) => r0 + (value - d0) * k) as Scale;
  scale.invert = (pixel: number) => (k === 0 ? d0 : d0 + (pixel - r0) / k);
  return scale;
}

/** The smallest of 1, 2, 5 × 10ⁿ at or above `rough` (never below 1: counts are whole numbers). */
export function niceStep(rough: number): number {
  if (!(rough > 1)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const normal = rough / magnitude;
  const factor = normal <= 1 ? 1 : normal <= 2 ? 2 : normal <= 5 ? 5 : 10;
  return factor * magnitude;
}

/**
 * Only a limit that the data reaches at least a quarter of goes on the scale: otherwise a few
 * requests against a limit of thousands would draw as a flat line at zero.
 */
const LIMIT_IN_VIEW_FACTOR = 4;

export interface ValueAxis {
  max: number;
  ticks: number[];
  limitShown: boolean;
}

/** The value axis for data up to `maxValue`, with some headroom; the limit on it when it is in view. */
export function valueAxis(maxValue: number, limit: number | undefined, tickCount = 4): ValueAxis {
  const limitShown = limit !== undefined && limit > 0 && limit <= Math.max(maxValue, 1) * LIMIT_IN_VIEW_FACTOR;
  const top = Math.max(1, maxValue, limitShown ? limit : 0) * 1.05;
  const step = niceStep(top / tickCount);
  const max = Math.ceil(top / step) * step;
  const ticks: number[] = [];
  for (let value = 0; value <= max; value += step) ticks.push(value);
  return { max, ticks, limitShown };
}

/**
 * Instants in [start, end] that are whole multiples of `step` in local time, where local time is
 * UTC plus `offsetMs` (so a 3-hour step gives 00:00, 03:00, … on the viewer's clock).
 */
export function timeTicks(start: number, end: number, step: number, offsetMs: number): number[] {
  const ticks: number[] = [];
  for (let t = Math.ceil((start + offsetMs) / step) * step - offsetMs; t <= end; t += step) ticks.push(t);
  return ticks;
}

const round = (n: number) => Math.round(n * 10) / 10;

/**
 * A bucket's bar, horizontally: its own width less a 1-unit gap where there is room, never thinner than
 * `minWidth` and centred on the bucket, so one busy minute among 1,440 stays visible (it may then
 * overlap its neighbours, which is better than a hairline).
 */
export function barSpan(start: number, bucketMs: number, x: Scale, minWidth: number): { x: number; width: number } {
  const left = x(start);
  const full = x(start + bucketMs) - left;
  const width = Math.max(minWidth, full >= 4 ? full - 1 : full);
  return { x: round(left + (full - width) / 2), width: round(width) };
}

/**
 * Steps between time ticks, from a minute to four months: the chart takes the smallest that leaves
 * `minSpacing` units between labels.
 */
const TICK_STEPS_MINUTES = [
  1,
  5,
  10,
  15,
  30,
  60,
  180,
  360,
  720,
  1_440,
  2 * 1_440,
  5 * 1_440,
  10 * 1_440,
  30 * 1_440,
  60 * 1_440,
  120 * 1_440,
];

export function tickStep(spanMs: number, width: number, minSpacing = 90): number {
  const most = Math.max(1, Math.floor(width / minSpacing));
  const minutes = TICK_STEPS_MINUTES.find((step) => spanMs / (step * 60_000) <= most) ?? TICK_STEPS_MINUTES.at(-1)!;
  return minutes * 60_000;
}

/** The bucket under time `t`, clamped to the chart. */
export function bucketIndexAt(t: number, firstStart: number, width: number, count: number): number {
  return Math.min(count - 1, Math.max(0, Math.floor((t - firstStart) / width)));
}

export interface Totals {
  admitted: number;
  refused: number;
  /** Of admitted, how many may not have been made (a restart of the key's limiter: the usage API's `uncertain`). */
  uncertain: number;
  /** The largest admitted + refused in one bucket. */
  peak: number;
}

export function totals(buckets: ReadonlyArray<{ admitted: number; refused: number; uncertain?: number }>): Totals {
  let admitted = 0;
  let refused = 0;
  let uncertain = 0;
  let peak = 0;
  for (const bucket of buckets) {
    admitted += bucket.admitted;
    refused += bucket.refused;
    uncertain += bucket.uncertain ?? 0;
    peak = Math.max(peak, bucket.admitted + bucket.refused);
  }
  return { admitted, refused, uncertain, peak };
}
