import { currencyExponent, divideHalfEven, divideSafeHalfEven, formatQuotient, parseDecimal, pow10 } from "../platform/money.ts";

/**
 * Currency conversion with a day's reference rates, exactly: rates are decimal strings, amounts integer minor
 * units, and the one division rounds half-even to the target's minor unit (BigInt; never a float). Pure.
 */

/** A day's rates: units of each currency for one unit of `base` (the base's own rate is 1). */
export interface RateDay {
  base: string;
  date: string;
  rates: Readonly<Record<string, string>>;
}

/** Units of `to` for one unit of `from` (major units), as an exact fraction. */
export interface CrossRate {
  numerator: bigint;
  denominator: bigint;
}

/** How many decimals a rate is shown with; the conversion itself uses the exact fraction. */
const RATE_DECIMALS = 10;

function rateOf(day: RateDay, currency: string) {
  if (currency === day.base) return { units: 1n, scale: 0 };
  const rate = day.rates[currency];
  return rate === undefined ? null : parseDecimal(rate);
}

/** Whether `currency` has a rate that day (the base always has: 1). */
export const hasRate = (day: RateDay, currency: string) => rateOf(day, currency) !== null;

/** from → to through the base: rate(to) ÷ rate(from); null when either has no rate that day. */
export function crossRate(day: RateDay, from: string, to: string): CrossRate | null {
  if (from === to) return { numerator: 1n, denominator: 1n };
  const [source, target] = [rateOf(day, from), rateOf(day, to)];
  if (!source || !target) return null;
  return { numerator: target.units * pow10(source.scale), denominator: source.units * pow10(target.scale) };
}

/**
 * `minor` units of `from` in minor units of `to`, rounded half-even: 1999 USD cents at 0.9231… EUR/USD → 1845 cents. A
 * BigInt: a large amount in a currency of a high rate may pass 2^53 minor units.
 */
export function convertMinor(minor: number, from: string, to: string, rate: CrossRate): bigint {
  const numerator = BigInt(minor) * rate.numerator * pow10(currencyExponent(to));
  return divideHalfEven(numerator, rate.denominator * pow10(currencyExponent(from)));
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function greatestCommonDivisor(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

/**
 * convertMinor for one pair of currencies, set up once for the many amounts of a list: the fraction with both minor
 * units in it, reduced, so a realistic amount converts with Numbers, exactly (divideSafeHalfEven: every value under
 * 2^53), and without BigInt; convertMinor itself beyond that. A number, or a bigint only past Number.MAX_SAFE_INTEGER
 * (so equal amounts are always of one type, and `===` compares them).
 */
export function minorConverter(from: string, to: string, rate: CrossRate): (minor: number) => number | bigint {
  const scaledNumerator = rate.numerator * pow10(currencyExponent(to));
  const scaledDenominator = rate.denominator * pow10(currencyExponent(from));
  const common = greatestCommonDivisor(scaledNumerator, scaledDenominator);
  const [numerator, denominator] = [Number(scaledNumerator / common), Number(scaledDenominator / common)];
  const small = Number.isSafeInteger(numerator) && Number.isSafeInteger(denominator);
  return (minor) => {
    const scaled = minor * numerator;
    if (small && minor >= 0 && scaled + denominator <= Number.MAX_SAFE_INTEGER) return divideSafeHalfEven(scaled, denominator);
    const converted = convertMinor(minor, from, to, rate);
    return converted <= MAX_SAFE && converted >= -MAX_SAFE ? Number(converted) : converted;
  };
}

export const formatRate = (rate: CrossRate) => formatQuotient(rate.numerator, rate.denominator, RATE_DECIMALS);
