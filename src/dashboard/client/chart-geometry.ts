/**
 * The usage chart's geometry, free of the DOM so it can be unit-tested (test/node/usage-chart.test.ts):
 * scales, "nice" axis ticks, time ticks on local boundaries, and the SVG paths of stacked step areas.
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

export interface Band {
  /** Bucket start times (ms), oldest first, evenly spaced by `width`. */
  starts: number[];
  width: number;
  lower: number[];
  upper: number[];
}

const round = (n: number) => Math.round(n * 10) / 10;

/**
 * The closed SVG path of the area between `lower` and `upper`, drawn as steps (each bucket a flat
 * run over its time); neighbouring buckets with the same values share one run, so a quiet day is a
 * handful of points rather than 1,440. Empty when the band has no height anywhere.
 */
export function stepBandPath({ starts, width, lower, upper }: Band, x: Scale, y: Scale): string {
  const runs: Array<{ from: number; to: number; lo: number; hi: number }> = [];
  starts.forEach((start, i) => {
    const lo = lower[i]!;
    const hi = upper[i]!;
    const last = runs.at(-1);
    if (last && last.lo === lo && last.hi === hi && last.to === start) last.to = start + width;
    else runs.push({ from: start, to: start + width, lo, hi });
  });
  if (!runs.some((run) => run.hi > run.lo)) return "";
  const point = (t: number, v: number) => `${round(x(t))},${round(y(v))}`;
  const top = runs.flatMap((run) => [point(run.from, run.hi), point(run.to, run.hi)]);
  const bottom = runs.reverse().flatMap((run) => [point(run.to, run.lo), point(run.from, run.lo)]);
  return `M${top.join("L")}L${bottom.join("L")}Z`;
}

/** The bucket under time `t`, clamped to the chart. */
export function bucketIndexAt(t: number, firstStart: number, width: number, count: number): number {
  return Math.min(count - 1, Math.max(0, Math.floor((t - firstStart) / width)));
}

export interface Totals {
  admitted: number;
  refused: number;
  /** The largest admitted + refused in one bucket. */
  peak: number;
}

export function totals(buckets: ReadonlyArray<{ admitted: number; refused: number }>): Totals {
  let admitted = 0;
  let refused = 0;
  let peak = 0;
  for (const bucket of buckets) {
    admitted += bucket.admitted;
    refused += bucket.refused;
    peak = Math.max(peak, bucket.admitted + bucket.refused);
  }
  return { admitted, refused, peak };
}
