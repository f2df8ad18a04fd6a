// The usage chart's geometry (src/dashboard/browser/chart-geometry.ts): pure functions, no DOM.
import { describe, expect, it } from "vitest";
import {
  barSpan,
  bucketIndexAt,
  linearScale,
  niceStep,
  tickStep,
  timeTicks,
  totals,
  valueAxis,
} from "../../src/dashboard/browser/chart-geometry.ts";

describe("usage chart geometry", () => {
  it("scales linearly both ways, including an inverted pixel range", () => {
    const y = linearScale(0, 100, 200, 0);
    expect(y(0)).toBe(200);
    expect(y(25)).toBe(150);
    expect(y.invert(150)).toBe(25);
    expect(linearScale(5, 5, 0, 10)(5)).toBe(0); // an empty domain does not divide by zero
  });

  it("picks 1, 2 or 5 times a power of ten, and never a fraction of a request", () => {
    expect([0.3, 1, 1.5, 2.6, 4, 7, 12, 180, 4_100].map(niceStep)).toEqual([1, 1, 2, 5, 5, 10, 20, 200, 5_000]);
  });

  it("puts the limit on the value axis when the data reaches a quarter of it, with headroom above", () => {
    const reached = valueAxis(12, 10);
    expect(reached).toEqual({ max: 15, ticks: [0, 5, 10, 15], limitShown: true });
    const low = valueAxis(3, 10);
    expect(low.limitShown).toBe(true);
    expect(low.max).toBeGreaterThan(10);
    // 3 requests against 600 an hour: fit the data, say the limit is off the scale.
    const far = valueAxis(3, 600);
    expect(far.limitShown).toBe(false);
    expect(far.max).toBe(4);
    expect(far.ticks).toEqual([0, 1, 2, 3, 4]);
    expect(valueAxis(0, undefined)).toEqual({ max: 2, ticks: [0, 1, 2], limitShown: false });
  });

  it("places time ticks on local boundaries", () => {
    const hour = 3_600_000;
    const start = Date.UTC(2026, 10, 22, 10, 17);
    const end = start + 24 * hour;
    const utc = timeTicks(start, end, 6 * hour, 0).map((t) => new Date(t).toISOString().slice(11, 16));
    expect(utc).toEqual(["12:00", "18:00", "00:00", "06:00"]);
    // At UTC+2 the ticks fall on 12:00, 18:00… local, which is 10:00, 16:00… UTC.
    const plusTwo = timeTicks(start, end, 6 * hour, 2 * hour).map((t) => new Date(t).toISOString().slice(11, 16));
    expect(plusTwo).toEqual(["16:00", "22:00", "04:00", "10:00"]);
  });

  it("gives each bucket a bar: its width less a gap when wide, at least the minimum and centred when narrow", () => {
    // An hour of minutes on 880 units: 14.7 each, drawn 13.7 wide with a gap.
    const hour = linearScale(0, 60 * 60_000, 40, 920);
    expect(barSpan(59 * 60_000, 60_000, hour, 2)).toEqual({ x: 905.8, width: 13.7 });
    // A day of minutes on 880 units: 0.6 each, drawn 2 wide around the bucket's middle, so one busy minute shows.
    const day = linearScale(0, 1_440 * 60_000, 40, 920);
    const lone = barSpan(700 * 60_000, 60_000, day, 2);
    expect(lone.width).toBe(2);
    expect(lone.x + lone.width / 2).toBeCloseTo(day(700.5 * 60_000), 1);
  });

  it("spaces time ticks so their labels fit the width", () => {
    const minute = 60_000;
    expect(tickStep(60 * minute, 880)).toBe(10 * minute); // an hour on a desktop: every 10 minutes
    expect(tickStep(60 * minute, 300)).toBe(30 * minute); // on a phone: every 30
    expect(tickStep(1_440 * minute, 880)).toBe(180 * minute); // a day: every 3 hours
    expect(tickStep(30 * 1_440 * minute, 300)).toBe(10 * 1_440 * minute); // a month on a phone: every 10 days
  });

  it("finds the bucket under the pointer, clamped to the chart", () => {
    expect(bucketIndexAt(1_500, 1_000, 60, 1_440)).toBe(8);
    expect(bucketIndexAt(0, 1_000, 60, 1_440)).toBe(0);
    expect(bucketIndexAt(10_000_000, 1_000, 60, 1_440)).toBe(1_439);
  });

  it("adds up admitted, refused and uncertain separately, and finds the busiest bucket", () => {
    expect(
      totals([
        { admitted: 10, refused: 2, uncertain: 4 },
        { admitted: 3, refused: 0 },
        { admitted: 0, refused: 0 },
      ]),
    ).toEqual({ admitted: 13, refused: 2, uncertain: 4, peak: 12 });
    expect(totals([])).toEqual({ admitted: 0, refused: 0, uncertain: 0, peak: 0 });
  });
});
