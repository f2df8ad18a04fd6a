// npm run dev's cron scheduler (scripts/dev-crons.ts): wrangler.toml's crons read, and each run in the minutes it names.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { cronsOf, parseCron, runsAt } from "../../scripts/dev-crons.ts";

const at = (iso: string) => new Date(iso);

describe("the crons npm run dev runs", () => {
  it("are wrangler.toml's [triggers] crons", () => {
    const toml = readFileSync(new URL("../../wrangler.toml", import.meta.url), "utf8");
    expect(cronsOf(toml)).toEqual(["* * * * *", "*/1 * * * *"]);
    expect(cronsOf('[vars]\ncrons = ["0 0 * * *"]\n')).toEqual([]);
  });

  it("each runs in the minutes its expression names", () => {
    expect(runsAt(parseCron("* * * * *"), at("2026-12-07T21:37:00Z"))).toBe(true);
    const quarter = parseCron("*/15 9-17 * * MON-FRI");
    expect(runsAt(quarter, at("2026-12-07T09:45:00Z"))).toBe(true); // a Monday
    expect(runsAt(quarter, at("2026-12-07T09:46:00Z"))).toBe(false);
    expect(runsAt(quarter, at("2026-12-07T18:00:00Z"))).toBe(false);
    expect(runsAt(quarter, at("2026-12-06T09:45:00Z"))).toBe(false); // a Sunday
    expect(runsAt(parseCron("0 0 1 JAN,jul *"), at("2027-07-01T00:00:00Z"))).toBe(true);
    expect(runsAt(parseCron("30 6 * * 7"), at("2026-12-06T06:30:00Z"))).toBe(true); // 7 is Sunday too
    // Both day fields restricted: either day matches.
    const either = parseCron("0 12 13 * 5");
    expect(runsAt(either, at("2026-11-13T12:00:00Z"))).toBe(true); // the 13th (a Friday)
    expect(runsAt(either, at("2026-12-04T12:00:00Z"))).toBe(true); // a Friday
    expect(runsAt(either, at("2026-12-07T12:00:00Z"))).toBe(false);
    expect(runsAt(parseCron("0 0 L * *"), at("2026-12-31T00:00:00Z"))).toBe(true); // Cloudflare's L: the month's last day
    expect(runsAt(parseCron("0 0 L * *"), at("2026-12-30T00:00:00Z"))).toBe(false);
    expect(runsAt(parseCron("* * * * *"), at("2026-12-07T21:37:42Z"))).toBe(true); // any moment of the minute
  });

  it("an expression it cannot read is refused by name, never misread", () => {
    expect(() => parseCron("* * * *")).toThrow();
    expect(() => parseCron("61 * * * *")).toThrow(/minute: 61/);
    expect(() => parseCron("0 25 * * *")).toThrow(/hour/);
    expect(() => parseCron("5/20 * * * *")).toThrow(/stepping/); // ambiguous: croner asks for */20 or 5-59/20
  });
});
