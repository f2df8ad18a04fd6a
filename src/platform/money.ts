import { z } from "zod";

/**
 * Exact money. Amounts are integers of the currency's minor unit (cents, yen, fils); on the wire they
 * are decimal strings ("14.99"). Only integer and string arithmetic here: a float never holds money.
 */

const ZERO_DECIMALS = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF";
const THREE_DECIMALS = "BHD IQD JOD KWD LYD OMR TND";
const FOUR_DECIMALS = "CLF UYW";
const TWO_DECIMALS =
  "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD CAD CDF CHE CHF CHW CNY COP COU CRC " +
  "CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD " +
  "KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN " +
  "QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED " +
  "VES WST XCD XCG YER ZAR ZMW ZWG";

/** ISO-4217 trading currencies and their minor-unit exponents (digits after the decimal point). */
const CURRENCY_EXPONENTS: ReadonlyMap<string, number> = new Map(
  (
    [
      [ZERO_DECIMALS, 0],
      [TWO_DECIMALS, 2],
      [THREE_DECIMALS, 3],
      [FOUR_DECIMALS, 4],
    ] as const
  ).flatMap(([codes, exponent]) => codes.split(" ").map((code) => [code, exponent] as const)),
);

/** Every supported code, sorted: the document's enum and the dashboard's currency choices. */
export const CURRENCY_CODES: readonly string[] = [...CURRENCY_EXPONENTS.keys()].sort();

function isCurrency(code: string): boolean {
  return CURRENCY_EXPONENTS.has(code);
}

export function currencyExponent(currency: string): number {
  const exponent = CURRENCY_EXPONENTS.get(currency);
  if (exponent === undefined) throw new MoneyError(`${JSON.stringify(currency)} is not a supported ISO-4217 currency code`);
  return exponent;
}

/** Why an amount was refused, as a phrase to follow a field name ("price: must not be negative"). */
export class MoneyError extends Error {}

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;
/** DECIMAL as the API document states it. */
export const MONEY_PATTERN = /^\d+(\.\d+)?$/;

/** The shape check that needs no currency; undefined when the string is a plain non-negative decimal. */
function shapeProblem(value: string): string | undefined {
  if (DECIMAL.test(value)) return undefined;
  if (/^\s|\s$/.test(value)) return "must not have spaces around it";
  if (value.startsWith("-")) return "must not be negative";
  if (/^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$/.test(value)) return 'must be written without an exponent (e.g. "1500", not "1.5e3")';
  return 'must be a decimal string of digits with an optional decimal point, such as "14.99"';
}

/** "14.99" in USD → 1499. Throws MoneyError saying why for anything that is not an exact amount. */
export function parseMoney(value: string, currency: string): number {
  const decimal = DECIMAL.exec(value);
  if (!decimal) throw new MoneyError(shapeProblem(value));
  const exponent = currencyExponent(currency);
  const [, whole = "", fraction = ""] = decimal;
  if (fraction.length > exponent) {
    throw new MoneyError(
      exponent === 0
        ? `must be a whole number: ${currency} has no minor unit`
        : `has ${fraction.length} decimal places; ${currency} allows at most ${exponent}`,
    );
  }
  const digits = whole + fraction.padEnd(exponent, "0");
  // 15 digits are always below 2^53: only a longer amount needs BigInt to tell (a converted list parses millions).
  if (digits.length <= 15) return Number(digits);
  const minor = BigInt(digits);
  if (minor > BigInt(MAX_MINOR_UNITS)) throw new MoneyError("is too large");
  return Number(minor);
}

/** 1499 in USD → "14.99"; -50 → "-0.50" (differences can be negative). */
export function formatMoney(minor: number | bigint, currency: string): string {
  if (typeof minor === "number" && !Number.isSafeInteger(minor)) throw new MoneyError(`${minor} is not a whole number of minor units`);
  const exponent = currencyExponent(currency);
  // No BigInt made from a number: a converted list formats millions of amounts.
  const magnitude = typeof minor === "number" ? Math.abs(minor) : minor < 0n ? -minor : minor;
  const digits = magnitude.toString().padStart(exponent + 1, "0");
  const sign = minor < 0 ? "-" : "";
  if (exponent === 0) return sign + digits;
  return `${sign}${digits.slice(0, -exponent)}.${digits.slice(-exponent)}`;
}

// Exact decimals: rates and quantities

/** A positive decimal string (a rate, a quantity): no sign, no exponent, no leading zeros, not zero. */
export const POSITIVE_DECIMAL_PATTERN = /^([1-9]\d*(\.\d+)?|0\.\d*[1-9]\d*)$/;

/** "1.0832" → 10832 / 10^4, exactly. */
export interface Decimal {
  units: bigint;
  scale: number;
}

export function parseDecimal(value: string): Decimal {
  if (!POSITIVE_DECIMAL_PATTERN.test(value)) throw new MoneyError('must be a positive decimal string such as "1.0832"');
  const [whole = "", fraction = ""] = value.split(".");
  return { units: BigInt(whole + fraction), scale: fraction.length };
}

const TEN = 10n;
export const pow10 = (digits: number) => TEN ** BigInt(digits);

/** numerator / denominator (denominator > 0) rounded to the nearest integer, ties to the even one: banker's rounding. */
export function divideHalfEven(numerator: bigint, denominator: bigint): bigint {
  const negative = numerator < 0n;
  const n = negative ? -numerator : numerator;
  let quotient = n / denominator;
  const twice = (n % denominator) * 2n;
  if (twice > denominator || (twice === denominator && quotient % 2n === 1n)) quotient += 1n;
  return negative ? -quotient : quotient;
}

/**
 * divideHalfEven for non-negative numbers whose sum is at most Number.MAX_SAFE_INTEGER, without BigInt: the float
 * quotient is then within one of the true one, and every product and remainder below is exact.
 */
export function divideSafeHalfEven(numerator: number, denominator: number): number {
  let quotient = Math.floor(numerator / denominator);
  let remainder = numerator - quotient * denominator;
  if (remainder < 0) {
    quotient--;
    remainder += denominator;
  } else if (remainder >= denominator) {
    quotient++;
    remainder -= denominator;
  }
  const rest = denominator - remainder;
  return remainder > rest || (remainder === rest && quotient % 2 === 1) ? quotient + 1 : quotient;
}

/** numerator / denominator as a decimal string rounded half-even to `decimals` places, trailing zeros dropped ("1.0832"). */
export function formatQuotient(numerator: bigint, denominator: bigint, decimals: number): string {
  const digits = divideHalfEven(numerator * pow10(decimals), denominator)
    .toString()
    .padStart(decimals + 1, "0");
  const whole = digits.slice(0, -decimals);
  const fraction = digits.slice(-decimals).replace(/0+$/, "");
  return fraction === "" ? whole : `${whole}.${fraction}`;
}

// zod, for request bodies and queries

/** An ISO-4217 code we know the minor unit of; upper case on the wire. */
export const currencySchema = z
  .string({ error: 'must be an ISO-4217 currency code such as "USD"' })
  .refine(isCurrency, {
    error: (issue) => `${JSON.stringify(issue.input)} is not a supported ISO-4217 currency code (use upper case, e.g. "USD")`,
  })
  .meta({ enum: [...CURRENCY_CODES], description: "ISO-4217 code, upper case", example: "USD" });

/**
 * A non-negative decimal string. Whether its decimals fit the currency needs the sibling `currency`
 * field: check that with `moneyFieldsFit` on the enclosing object.
 */
export const moneyStringSchema = z
  .string({ error: 'must be a decimal string such as "14.99" (a JSON number could lose precision)' })
  .superRefine((value, ctx) => {
    const problem = shapeProblem(value);
    if (problem) ctx.addIssue({ code: "custom", message: problem, input: value });
  })
  .meta({
    pattern: MONEY_PATTERN.source,
    description:
      "A decimal string, never a JSON number, with at most the currency's minor-unit digits (0 for JPY, 2 for USD, 3 for KWD, 4 for " +
      "CLF) and at most 2^53-1 minor units",
    example: "14.99",
  });

/** The largest amount, in minor units, the API holds exactly: a JavaScript number beyond it is no longer a whole count. */
export const MAX_MINOR_UNITS = Number.MAX_SAFE_INTEGER;

/**
 * A superRefine for an object holding `currency`, a price and the cost added to it: their total must be within
 * MAX_MINOR_UNITS too (each alone may be), else every view showing the total would fail. Reported under the price.
 */
export function moneyTotalFits<P extends string, A extends string>(price: P, added: A) {
  return (value: { currency: string } & Partial<Record<P | A, string | null | undefined>>, ctx: z.RefinementCtx) => {
    const [amount, addition] = [value[price], value[added]];
    if (!isCurrency(value.currency) || typeof amount !== "string" || typeof addition !== "string") return;
    let total: number;
    try {
      total = parseMoney(amount, value.currency) + parseMoney(addition, value.currency);
    } catch (error) {
      if (error instanceof MoneyError) return; // moneyFieldsFit names that field
      throw error;
    }
    if (total <= MAX_MINOR_UNITS) return;
    ctx.addIssue({
      code: "custom",
      path: [price],
      message:
        `with ${added} ${addition}, the total is over ${MAX_MINOR_UNITS.toLocaleString("en")} minor units of ${value.currency} ` +
        `(2^53-1, the most the API can add exactly); send the real ${price} and ${added}`,
      input: amount,
    });
  };
}

/**
 * A superRefine for an object holding `currency` and money strings: reports each field whose amount
 * does not fit the currency (too many decimals, too large), under that field's name.
 */
export function moneyFieldsFit<K extends string>(fields: readonly K[]) {
  return (value: { currency: string } & Partial<Record<K, string | null | undefined>>, ctx: z.RefinementCtx) => {
    if (!isCurrency(value.currency)) return; // currencySchema has said so already
    for (const field of fields) {
      const amount = value[field];
      if (typeof amount !== "string") continue;
      try {
        parseMoney(amount, value.currency);
      } catch (error) {
        if (!(error instanceof MoneyError)) throw error;
        ctx.addIssue({ code: "custom", path: [field], message: error.message, input: amount });
      }
    }
  };
}
