import { describe, expect, it } from "vitest";
import { AdmissionWindow, type StoredBlock } from "../../src/api-keys/object/reservations.ts";
import { thresholdsCrossed } from "../../src/api-keys/object/usage-threshold.ts";
import { HOUR_MS, MINUTE_MS } from "../../src/platform/time.ts";
import type { Limits } from "../../src/rate-limit/types.ts";

const limits: Limits = { per_minute: 10, per_hour: 25, per_day: 40 };
const T = Date.parse("2030-07-01T10:00:00Z");

/** A window as a wake leaves it: from a stored row, or none. */
const fresh = () => AdmissionWindow.woken(undefined, T).window;

/** Admits `n` at `at` (each must be admitted); returns which of them opened a block. */
function admit(window: AdmissionWindow, at: number, n = 1): boolean[] {
  return Array.from({ length: n }, () => {
    const { decision, opened } = window.decide(at, limits);
    expect(decision.allowed).toBe(true);
    return opened;
  });
}

/** What a write at `at` would store: the counters and the block. */
function storedAt(window: AdmissionWindow, at: number) {
  const { minuteLog, hour, day } = window.usage;
  return {
    log: JSON.stringify(minuteLog),
    hour_start: hour.start,
    hour_count: hour.count,
    day_start: day.start,
    day_count: day.count,
    ...window.stored(at),
  };
}

describe("AdmissionWindow", () => {
  it("sizes a block by the last minute's admissions: 1, 2, 4, 8…, within the minute's room at the block's end", () => {
    const window = fresh();
    // A request a second: each block as big as the admissions of the last minute.
    const opened = Array.from({ length: 10 }, (_, i) => admit(window, T + i * 1000)[0]);
    expect(opened).toEqual([true, true, false, true, false, false, false, true, false, false]);
    expect(window.stored(T + 9000)).toEqual({ reserved: 5, reserved_until: T + 7000 + MINUTE_MS });
    // All at one instant, the minute's room binds: the 8th finds 7 others that will still be in the minute at its
    // block's end, so its block holds 3, not 8; the 9th uses one of them.
    const busy = fresh();
    admit(busy, T, 9);
    expect(busy.stored(T)).toEqual({ reserved: 1, reserved_until: T + MINUTE_MS });
  });

  it("never lets a block outlive its hour or hold more than the hour and day have left", () => {
    const window = fresh();
    admit(window, T + HOUR_MS - 2000, 2);
    expect(window.stored(T + HOUR_MS - 2000)).toEqual({ reserved: 1, reserved_until: T + HOUR_MS });
    // The next hour opens a block of its own, though the last one had room.
    expect(admit(window, T + HOUR_MS)).toEqual([true]);
    const near = fresh();
    for (let minute = 0; minute < 2; minute++) admit(near, T + minute * MINUTE_MS, 10);
    admit(near, T + 2 * MINUTE_MS, 4); // 24 of the hour's 25: the 4th's block can hold one more, not 4
    expect(near.stored(T + 2 * MINUTE_MS).reserved).toBe(1);
  });

  it("on a wake, counts what the stored block could still admit as made, at the latest moment it could have been", () => {
    const window = fresh();
    admit(window, T, 4); // blocks of 1, 2, then 4 (1 used): 3 reserved
    const row = storedAt(window, T);
    expect(row).toMatchObject<StoredBlock>({ reserved: 3, reserved_until: T + MINUTE_MS });
    // Woken 10 s later: the 3 counted at the wake.
    const soon = AdmissionWindow.woken(row, T + 10_000);
    expect(soon.assumed).toEqual({ at: T + 10_000, count: 3 });
    expect(soon.window.usage.minuteLog).toEqual([T, T, T, T, T + 10_000, T + 10_000, T + 10_000]);
    expect(soon.window.usage.hour.count).toBe(7);
    // Woken after the block's end: counted at its last moment, so they leave the minute a minute after it.
    const late = AdmissionWindow.woken(row, T + 5 * MINUTE_MS);
    expect(late.assumed).toEqual({ at: T + MINUTE_MS - 1, count: 3 });
    expect(late.window.usage.day.count).toBe(7);
    // Nothing reserved, nothing assumed.
    expect(AdmissionWindow.woken({ ...row, reserved: 0, reserved_until: 0 }, T).assumed).toBeUndefined();
  });

  it("stores no block once it has ended, and asks for a release only while it has admissions left", () => {
    const window = fresh();
    admit(window, T, 4);
    expect(window.releaseAt(T)).toBe(T + MINUTE_MS + 5_000);
    expect(window.stored(T + MINUTE_MS)).toEqual({ reserved: 0, reserved_until: 0 });
    expect(window.releaseAt(T + MINUTE_MS)).toBeUndefined();
    admit(window, T + 1000, 3); // the block used up
    expect(window.releaseAt(T + 1000)).toBeUndefined();
  });
});

describe("thresholdsCrossed", () => {
  it("names each threshold the count passed, one admission or a woken block at a time", () => {
    expect(thresholdsCrossed(79, 80, 100)).toEqual([80]);
    expect(thresholdsCrossed(80, 81, 100)).toEqual([]);
    expect(thresholdsCrossed(70, 100, 100)).toEqual([80, 100]);
    expect(thresholdsCrossed(0, 85, 100)).toEqual([80]);
  });
});
