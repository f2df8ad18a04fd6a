import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { conversionInto, convertProductJson } from "../../src/catalogue/converted.ts";
import type { ProductView } from "../../src/catalogue/schema.ts";
import { type OfferRow, type ProductRow, productView, type SummaryRow, summariseRows } from "../../src/catalogue/views.ts";
import { convertMinor, crossRate, formatRate, type RateDay } from "../../src/fx-rates/rates.ts";
import { CURRENCY_CODES, formatMoney, POSITIVE_DECIMAL_PATTERN, parseMoney } from "../../src/platform/money.ts";
import { CHECK_STATUSES, OFFER_CONDITIONS, QUANTITY_UNITS } from "../../src/platform/tables.ts";

/**
 * convertProductJson converts a product's JSON text in place; the definition it must match byte for byte is the
 * conversion as it was first written, below: the text parsed, the view converted as objects, and written again.
 */
function parsedConversion(json: string, target: string, day: RateDay | null): string {
  const view = JSON.parse(json) as ProductView;
  const rows: SummaryRow[] = [];
  const offers = view.offers.map((offer) => {
    const rate = day && crossRate(day, offer.currency, target);
    if (!day || !rate) return { ...offer, converted: null };
    const convert = (amount: string) => convertMinor(parseMoney(amount, offer.currency), offer.currency, target, rate);
    const price = convert(offer.price);
    const totalMinor = offer.total_price === null ? null : convert(offer.total_price);
    rows.push({ priceMinor: price, totalMinor, currency: target, inStock: offer.in_stock, competitorId: offer.competitor_id });
    const total = totalMinor === null ? null : formatMoney(totalMinor, target);
    return {
      ...offer,
      converted: { currency: target, price: formatMoney(price, target), total_price: total, rate: formatRate(rate), rate_date: day.date },
    };
  });
  const { offer_count, in_stock_count } = view.summary;
  return JSON.stringify({ ...view, offers, summary: { ...summariseRows(rows), currency: target, offer_count, in_stock_count } });
}

/** Text of every kind: any code point (lone surrogates, which JSON.stringify escapes, among them), and the keys the fast path looks for. */
const text = fc.oneof(
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.constantFrom('","price":"1.00', ',"currency":"USD', '},"created_at":"', '"offers":[{', "\\", '\\"', "€ 5,00", "日本語の商品"),
);
const nullable = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: null });
const timestamp = fc
  .date({ min: new Date("2020-01-01"), max: new Date("2030-01-01"), noInvalidDate: true })
  .map((date) => date.toISOString());
/** Minor units up to half of 2^53, so price + shipping is still an amount; most realistic, some past convertMinor's Number range. */
const minor = fc.oneof(fc.nat(1_000_000), fc.nat(Math.floor(Number.MAX_SAFE_INTEGER / 2)));
const currency = fc.constantFrom(...CURRENCY_CODES);
/** Mostly the currencies of each minor unit (2, 0, 3, 4), so offers and rates meet. */
const someCurrency = fc.oneof(currency, fc.constantFrom("USD", "EUR", "JPY", "KWD", "CLF"));
/** A rate as PUT /admin/fx-rates takes it: up to 10 decimals, with a few whole digits. */
const rate = fc
  .tuple(fc.nat(99_999), fc.nat(9_999_999_999), fc.nat(10))
  .map(([whole, fraction, scale]) => (scale === 0 ? String(whole) : `${whole}.${String(fraction).padStart(10, "0").slice(0, scale)}`))
  .filter((value) => POSITIVE_DECIMAL_PATTERN.test(value));
/** A day's rates for some currencies only (the others have none), or no rates at all yet. */
const rateDay = nullable(
  fc.record({
    base: someCurrency,
    date: fc.constantFrom("2026-12-07", "2026-01-31"),
    rates: fc.dictionary(someCurrency, rate, { maxKeys: 8 }),
  }),
).map((day) => (day ? { ...day, rates: Object.fromEntries(Object.entries(day.rates).filter(([code]) => code !== day.base)) } : null));

const offerRow = fc.record({
  competitorId: fc.oneof(text, fc.constantFrom("cmp_amazon", "cmp_fnac", "cmp_rakuten")),
  url: nullable(text),
  priceMinor: minor,
  regularPriceMinor: nullable(minor),
  currency: someCurrency,
  shippingMinor: nullable(minor),
  inStock: fc.boolean(),
  previousPriceMinor: nullable(minor),
  priceChangedAt: nullable(timestamp),
  checkedAt: timestamp,
  seller: nullable(text),
  condition: fc.constantFrom(...OFFER_CONDITIONS),
  unitPrice: nullable(fc.tuple(fc.constantFrom("250", "0.5", "1", "12.75"), fc.constantFrom(...QUANTITY_UNITS))),
  checkStatus: fc.constantFrom(...CHECK_STATUSES),
  lowestPrice30dMinor: nullable(minor),
});

/** A product as the snapshot's line holds it: productView's JSON, offers in competitor order, each competitor once. */
const productLine = fc
  .record({
    sku: text,
    gtin: nullable(text),
    mpn: nullable(text),
    name: text,
    brand: nullable(text),
    category: nullable(text),
    url: nullable(text),
    imageUrl: nullable(text),
    createdAt: timestamp,
    updatedAt: timestamp,
    lastChangedAt: nullable(timestamp),
    offers: fc.uniqueArray(offerRow, { maxLength: 6, selector: (offer) => offer.competitorId }),
    names: fc.array(text, { minLength: 6, maxLength: 6 }),
  })
  .map(({ offers, names, ...product }) => {
    const row: ProductRow = { id: "prd_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d", ...product, changedVersion: 1 };
    const offerRows = offers
      .sort((a, b) => (a.competitorId < b.competitorId ? -1 : 1))
      .map(
        ({ unitPrice, ...offer }): OfferRow => ({
          ...offer,
          productId: row.id,
          quantity: unitPrice?.[0] ?? null,
          unit: unitPrice?.[1] ?? null,
          priorPrices: [],
        }),
      );
    const competitorNames = new Map(offers.map((offer, i) => [offer.competitorId, { name: names[i]! }]));
    return JSON.stringify(productView(row, offerRows, competitorNames));
  });

describe("convertProductJson", () => {
  it("gives the text JSON.stringify gives of the converted view, for any product, rates and target currency", () => {
    fc.assert(
      fc.property(productLine, rateDay, someCurrency, (line, day, target) => {
        expect(convertProductJson(line, conversionInto(target, day))).toBe(parsedConversion(line, target, day));
      }),
      { numRuns: 2000 },
    );
  });

  it("converts many products with one conversion as each alone (the cross rates are worked out once)", () => {
    fc.assert(
      fc.property(fc.array(productLine, { minLength: 2, maxLength: 5 }), rateDay, someCurrency, (lines, day, target) => {
        const conversion = conversionInto(target, day);
        expect(lines.map((line) => convertProductJson(line, conversion))).toEqual(lines.map((line) => parsedConversion(line, target, day)));
      }),
      { numRuns: 200 },
    );
  });

  it("refuses a text that is not a product view's, rather than convert it wrongly", () => {
    const day = { base: "EUR", date: "2026-12-07", rates: { USD: "1.0832" } };
    const line = JSON.stringify(
      productView(
        {
          id: "prd_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d",
          sku: "S",
          gtin: null,
          mpn: null,
          name: "N",
          brand: null,
          category: null,
          url: null,
          imageUrl: null,
          createdAt: "2026-01-01T00:00:00.000Z",
          updatedAt: "2026-01-01T00:00:00.000Z",
          lastChangedAt: null,
          changedVersion: 1,
        },
        [],
        new Map(),
      ),
    );
    expect(convertProductJson(line, conversionInto("USD", day))).toBe(parsedConversion(line, "USD", day));
    expect(() => convertProductJson('{"id":"prd_x","offers":[]}', conversionInto("USD", day))).toThrow(/not where a ProductView has it/);
  });
});
