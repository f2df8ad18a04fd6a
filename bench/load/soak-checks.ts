/**
 * The soak's verdicts, from what the client saw: pure functions, so test/node can check their arithmetic.
 */

/** One admitted request as the client saw it: sent at `sentMs`, its 200 arrived at `receivedMs`. */
export interface Admission {
  sentMs: number;
  receivedMs: number;
}

/**
 * The most requests of one key that were certainly admitted within one 60 s window. The server
 * admitted each request somewhere between its sending and its answer; a set of admissions certainly
 * shared a window when the last answer came less than `windowMs` after the first sending. Client
 * clocks cannot do better without false alarms, so this never reports more than really happened.
 */
export function mostInOneWindow(admissions: readonly Admission[], windowMs = 60_000): number {
  const sorted = [...admissions].sort((a, b) => a.sentMs - b.sentMs);
  let most = 0;
  for (let i = 0; i < sorted.length; i++) {
    const end = sorted[i]!.sentMs + windowMs;
    let count = 0;
    for (let j = i; j < sorted.length && sorted[j]!.sentMs < end; j++) if (sorted[j]!.receivedMs < end) count++;
    most = Math.max(most, count);
  }
  return most;
}

/** The 99th percentile (nearest rank) of unsorted values; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Least-squares slope of y over x (units of y per unit of x); NaN with fewer than two points. */
function slope(points: readonly { x: number; y: number }[]): number {
  if (points.length < 2) return NaN;
  const n = points.length;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.x - mx) ** 2, 0);
  const sxy = points.reduce((s, p) => s + (p.x - mx) * (p.y - my), 0);
  return sxx === 0 ? NaN : sxy / sxx;
}

export interface Flatness {
  firstThirdMb: number;
  lastThirdMb: number;
  /** MiB per minute over the whole run. */
  slopeMbPerMinute: number;
  /** The last third's mean is at most `tolerance` above the first third's. */
  flat: boolean;
}

/** Memory is flat when the mean of the last third of the samples is within `tolerance` (a share) of the first third's. */
export function flatness(samples: readonly { atMs: number; mb: number }[], tolerance = 0.1): Flatness {
  const valid = samples.filter((s) => Number.isFinite(s.mb));
  const third = Math.floor(valid.length / 3);
  const mean = (part: readonly { mb: number }[]) => part.reduce((sum, s) => sum + s.mb, 0) / part.length;
  const firstThirdMb = third > 0 ? mean(valid.slice(0, third)) : NaN;
  const lastThirdMb = third > 0 ? mean(valid.slice(-third)) : NaN;
  const slopeMbPerMinute = slope(valid.map((s) => ({ x: s.atMs / 60_000, y: s.mb })));
  return { firstThirdMb, lastThirdMb, slopeMbPerMinute, flat: third > 0 && lastThirdMb <= firstThirdMb * (1 + tolerance) };
}
