import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { convertMinor, crossRate, formatRate, minorConverter, type RateDay } from "../../src/fx-rates/rates.ts";
import { currencyExponent, divideHalfEven } from "../../src/platform/money.ts";

/**
 * Conversion rounding, as properties: the converted amount is the exact quotient rounded to the nearest minor unit,
 * ties to the even one, checked with BigInt cross-multiplication against the rates' own digits (no float anywhere).
 */

const CURRENCIES = ["EUR", "USD", "JPY", "KWD", "BHD", "GBP", "ISK", "CLF"] as const;
const rateText = fc
  .tuple(fc.integer({ min: 0, max: 99_999 }), fc.integer({ min: 0, max: 999_999 }), fc.integer({ min: 0, max: 6 }))
  .filter(([whole, fraction]) => whole > 0 || fraction > 0)
  .map(([whole, fraction, scale]) => (scale === 0 ? String(whole || 1) : `${whole}.${String(fraction).padStart(6, "0").slice(0, scale)}`))
  .filter((text) => /[1-9]/.test(text));
const day = fc.record({
  base: fc.constantFrom(...CURRENCIES),
  rates: fc.record(Object.fromEntries(CURRENCIES.map((code) => [code, rateText]))),
});
const decimal = (text: string) => {
  const [whole = "", fraction = ""] = text.split(".");
  return { units: BigInt(whole + fraction), scale: fraction.length };
};

describe("divideHalfEven", () => {
  it("rounds to the nearest integer, ties to the even one, symmetric around zero", () => {
    expect([5n, 15n, 25n, -5n, -15n, 7n, -7n].map((n) => divideHalfEven(n, 10n))).toEqual([0n, 2n, 2n, 0n, -2n, 1n, -1n]);
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }), fc.bigInt({ min: 1n, max: 10n ** 20n }), (n, d) => {
        const q = divideHalfEven(n, d);
        const twice = 2n * (n - q * d); // 2 × the remainder: within ±d, and ±d only with q even
        expect(twice <= d && twice >= -d).toBe(true);
        if (twice === d || twice === -d) expect(q % 2n).toBe(0n);
        expect(divideHalfEven(-n, d)).toBe(-q);
      }),
    );
  });
});

describe("convertMinor", () => {
  it("is the exact amount × rate(to) ÷ rate(from), rounded half-even to the target's minor unit", () => {
    fc.assert(
      fc.property(
        day,
        fc.constantFrom(...CURRENCIES),
        fc.constantFrom(...CURRENCIES),
        fc.integer({ min: 0, max: 10 ** 12 }),
        ({ base, rates }, from, to, minor) => {
          const table: RateDay = { base, date: "2026-11-27", rates };
          const rate = crossRate(table, from, to)!;
          const result = convertMinor(minor, from, to, rate);
          // Independently: the rates' digits (the base's is 1), and exact = minor × 10^eTo × rTo ÷ (10^eFrom × rFrom).
          const r = (code: string) => (code === base ? { units: 1n, scale: 0 } : decimal(rates[code]!));
          const [rf, rt] = [r(from), r(to)];
          const numerator = BigInt(minor) * rt.units * 10n ** BigInt(rf.scale + currencyExponent(to));
          const denominator = rf.units * 10n ** BigInt(rt.scale + currencyExponent(from));
          const twice = 2n * (numerator - result * denominator);
          expect(twice <= denominator && twice >= -denominator).toBe(true);
          if (twice === denominator || twice === -denominator) expect(result % 2n).toBe(0n);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("keeps order (a dearer price never converts cheaper) and is the identity within one currency", () => {
    fc.assert(
      fc.property(
        day,
        fc.constantFrom(...CURRENCIES),
        fc.constantFrom(...CURRENCIES),
        fc.nat(10 ** 9),
        fc.nat(10 ** 9),
        (d, from, to, a, b) => {
          const rate = crossRate({ ...d, date: "2026-11-27" }, from, to)!;
          const [low, high] = a <= b ? [a, b] : [b, a];
          expect(convertMinor(low, from, to, rate)).toBeLessThanOrEqual(convertMinor(high, from, to, rate));
          expect(convertMinor(a, from, from, crossRate({ ...d, date: "2026-11-27" }, from, from)!)).toBe(BigInt(a));
        },
      ),
    );
  });

  it("worked examples: JPY has no decimals, KWD three, and a tie goes to the even digit", () => {
    const table: RateDay = { base: "EUR", date: "2026-11-27", rates: { USD: "1.0832", JPY: "10", KWD: "0.3331" } };
    const convert = (minor: number, from: string, to: string) => convertMinor(minor, from, to, crossRate(table, from, to)!);
    expect(convert(5, "EUR", "JPY")).toBe(0n); // 0.05 EUR = 0.5 JPY: a tie, to 0
    expect(convert(15, "EUR", "JPY")).toBe(2n); // 1.5 JPY: a tie, to 2
    expect(convert(2500, "EUR", "KWD")).toBe(8328n); // 8.3275: a tie, to 8.328
    expect(convert(1999, "USD", "EUR")).toBe(1845n); // 18.4545…
    expect(crossRate(table, "USD", "GBP")).toBeNull(); // no GBP rate that day
    expect(formatRate(crossRate(table, "USD", "EUR")!)).toBe("0.9231905465");
    expect(formatRate(crossRate(table, "EUR", "USD")!)).toBe("1.0832");
  });
});

describe("minorConverter", () => {
  const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
  /** Rates whose quotients often end in exactly a half, so ties are met as often as anything else. */
  const tieRate = fc.constantFrom("2", "4", "0.5", "0.25", "1.25", "8", "20", "0.125", "2.5");
  const tieDay = fc.record({
    base: fc.constantFrom(...CURRENCIES),
    rates: fc.record(Object.fromEntries(CURRENCIES.map((code) => [code, tieRate]))),
  });

  it("is convertMinor: a number while the amount is one, a bigint past 2^53, in Number arithmetic or BigInt", () => {
    fc.assert(
      fc.property(
        fc.oneof(day, tieDay),
        fc.constantFrom(...CURRENCIES),
        fc.constantFrom(...CURRENCIES),
        fc.oneof(fc.nat(100_000), fc.nat(Number.MAX_SAFE_INTEGER)),
        ({ base, rates }, from, to, minor) => {
          const rate = crossRate({ base, date: "2026-11-27", rates }, from, to)!;
          const expected = convertMinor(minor, from, to, rate);
          const converted = minorConverter(from, to, rate)(minor);
          expect(typeof converted).toBe(expected <= MAX_SAFE ? "number" : "bigint");
          expect(BigInt(converted)).toBe(expected);
        },
      ),
      { numRuns: 3000 },
    );
  });
});
