import { describe, expect, it } from "vitest";
import { HOUR_MS } from "../../src/platform/time.ts";
import { Usage } from "../../src/rate-limit/window.ts";

// The window logic on its own, with quotas the plans don't have, so the hour and day can bind alone.
const limits = { per_minute: 3, per_hour: 5, per_day: 7 };

function admit(usage: Usage, now: number) {
  usage.slide(now);
  return usage.decide(now, limits);
}

describe("Usage", () => {
  it("slides the minute exactly: the oldest entry frees its slot 60 s after it was admitted", () => {
    const usage = new Usage();
    expect(admit(usage, 1_000)).toMatchObject({ allowed: true, remaining: 2, resetSeconds: 60 });
    admit(usage, 2_000);
    expect(admit(usage, 3_000)).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 58 });
    expect(admit(usage, 60_999)).toMatchObject({ allowed: false, resetMs: 1, resetSeconds: 1, exceeded: "minute" });
    expect(admit(usage, 61_000)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("refuses on the hour quota when the minute has room, until the clock hour ends", () => {
    const usage = new Usage();
    for (const t of [0, 1, 2]) expect(admit(usage, t).allowed).toBe(true);
    for (const t of [70_000, 70_001]) expect(admit(usage, t).allowed).toBe(true);
    const refused = admit(usage, 200_000);
    expect(refused).toMatchObject({ allowed: false, exceeded: "hour", resetSeconds: (HOUR_MS - 200_000) / 1000 });
    expect(admit(usage, HOUR_MS).allowed).toBe(true);
  });

  it("refuses on the day quota across hours", () => {
    const usage = new Usage();
    for (let h = 0; h < 2; h++) for (let i = 0; i < 3; i++) admit(usage, h * HOUR_MS + i);
    admit(usage, 2 * HOUR_MS);
    const refused = admit(usage, 3 * HOUR_MS);
    expect(refused).toMatchObject({ allowed: false, exceeded: "day", resetSeconds: 21 * 3600 });
  });

  it("does not count refusals", () => {
    const usage = new Usage();
    for (let i = 0; i < 3; i++) admit(usage, i);
    for (let i = 0; i < 10; i++) expect(admit(usage, 10 + i).allowed).toBe(false);
    expect(usage.hour.count).toBe(3);
    expect(usage.minuteLog).toHaveLength(3);
  });
});
