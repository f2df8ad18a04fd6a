import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  currencyExponent,
  currencySchema,
  formatMoney,
  MoneyError,
  moneyFieldsFit,
  moneyStringSchema,
  parseMoney,
} from "../../src/platform/money.ts";

describe("currency exponents", () => {
  it.each([
    ["USD", 2],
    ["EUR", 2],
    ["GBP", 2],
    ["CHF", 2],
    ["CAD", 2],
    ["AUD", 2],
    ["SEK", 2],
    ["NOK", 2],
    ["DKK", 2],
    ["PLN", 2],
    ["CZK", 2],
    ["INR", 2],
    ["BRL", 2],
    ["MXN", 2],
    ["JPY", 0],
    ["KRW", 0],
    ["BHD", 3],
    ["KWD", 3],
  ])("%s has %i decimals", (currency, exponent) => {
    expect(currencyExponent(currency)).toBe(exponent);
  });

  it("refuses codes it does not know, and lower case", () => {
    expect(() => currencyExponent("XYZ")).toThrow(MoneyError);
    expect(() => currencyExponent("usd")).toThrow(/not a supported ISO-4217/);
  });
});

describe("parseMoney", () => {
  it.each([
    ["14.99", "USD", 1499],
    ["14.9", "USD", 1490],
    ["14", "USD", 1400],
    ["0", "USD", 0],
    ["0.01", "EUR", 1],
    ["007.50", "GBP", 750],
    ["1500", "JPY", 1500],
    ["1.250", "BHD", 1250],
    ["1.2", "KWD", 1200],
    ["90071992547409.91", "USD", 9007199254740991],
  ])("%s %s → %i", (value, currency, minor) => {
    expect(parseMoney(value, currency)).toBe(minor);
  });

  it.each([
    ["14.999", "USD", /3 decimal places; USD allows at most 2/],
    ["1500.00", "JPY", /whole number: JPY has no minor unit/],
    ["1.2345", "BHD", /BHD allows at most 3/],
    ["-1.00", "USD", /negative/],
    ["1e3", "USD", /exponent/],
    ["1.5E+2", "USD", /exponent/],
    ["abc", "USD", /decimal string/],
    ["", "USD", /decimal string/],
    ["1,50", "EUR", /decimal string/],
    ["+1", "USD", /decimal string/],
    [".5", "USD", /decimal string/],
    ["5.", "USD", /decimal string/],
    [" 5", "USD", /spaces/],
    ["Infinity", "USD", /decimal string/],
    ["0x10", "USD", /decimal string/],
    ["90071992547409.92", "USD", /too large/],
    ["1.00", "XYZ", /not a supported ISO-4217/],
  ])("refuses %j in %s, saying why", (value, currency, why) => {
    expect(() => parseMoney(value, currency)).toThrow(why);
  });
});

describe("formatMoney", () => {
  it.each([
    [1499, "USD", "14.99"],
    [5, "USD", "0.05"],
    [0, "USD", "0.00"],
    [-50, "EUR", "-0.50"],
    [1500, "JPY", "1500"],
    [0, "JPY", "0"],
    [1250, "BHD", "1.250"],
    [7, "KWD", "0.007"],
    [9007199254740991, "USD", "90071992547409.91"],
    [123456789012345678901234567890n, "USD", "1234567890123456789012345678.90"],
  ] as const)("%s %s → %s", (minor, currency, text) => {
    expect(formatMoney(minor, currency)).toBe(text);
  });

  it("round-trips", () => {
    for (const [text, currency] of [
      ["14.99", "USD"],
      ["1500", "JPY"],
      ["1.250", "BHD"],
      ["0.10", "GBP"],
    ] as const) {
      expect(formatMoney(parseMoney(text, currency), currency)).toBe(text);
    }
  });

  it("refuses a fraction of a minor unit", () => {
    expect(() => formatMoney(14.99, "USD")).toThrow(MoneyError);
  });
});

describe("zod schemas", () => {
  const offer = z
    .object({ price: moneyStringSchema, shipping_cost: moneyStringSchema.optional(), currency: currencySchema })
    .superRefine(moneyFieldsFit(["price", "shipping_cost"]));

  it("accepts amounts that fit their currency", () => {
    expect(offer.parse({ price: "1500", currency: "JPY" })).toEqual({ price: "1500", currency: "JPY" });
    expect(offer.safeParse({ price: "1.250", shipping_cost: "0.500", currency: "BHD" }).success).toBe(true);
  });

  it.each([
    [{ price: 14.99, currency: "USD" }, ["price"], /decimal string/],
    [{ price: "-1", currency: "USD" }, ["price"], /negative/],
    [{ price: "1", currency: "usd" }, ["currency"], /ISO-4217/],
    [{ price: "1.00", currency: "JPY" }, ["price"], /JPY has no minor unit/],
    [{ price: "1.00", shipping_cost: "0.001", currency: "USD" }, ["shipping_cost"], /USD allows at most 2/],
  ])("names the field and the reason for %j", (input, path, why) => {
    const result = offer.safeParse(input);
    expect(result.success).toBe(false);
    const issue = result.error!.issues[0]!;
    expect(issue.path).toEqual(path);
    expect(issue.message).toMatch(why);
  });
});
