import { convertMinor, crossRate, formatRate, type RateDay } from "../fx-rates/rates.ts";
import { formatMoney, parseMoney } from "../platform/money.ts";
import type { OfferView, ProductView, SummaryView } from "./schema.ts";
import { type SummaryRow, summarise } from "./views.ts";

/**
 * `?currency=` (GET /products, GET /products/{id}, the MCP product tools): a product's view with each offer's
 * `converted` and the summary's min/max in the target currency. Applied to the view as served (the snapshot's line,
 * or D1's row made into a view), so every path gives the same answer.
 */

/** A request's conversion: the currency asked for, the day's rates (null: none stored yet), each cross rate worked out once. */
export interface Conversion {
  currency: string;
  day: RateDay | null;
  rateFrom(currency: string): FromCurrency | null;
}

/** A source currency's cross rate, shown, and as one exact step from its minor units to the target's. */
interface FromCurrency {
  text: string;
  convert(minor: number): bigint;
}

export function conversionInto(currency: string, day: RateDay | null): Conversion {
  const rates = new Map<string, FromCurrency | null>();
  return {
    currency,
    day,
    rateFrom(from) {
      if (!rates.has(from)) {
        const rate = day && crossRate(day, from, currency);
        rates.set(from, rate ? { text: formatRate(rate), convert: (minor) => convertMinor(minor, from, currency, rate) } : null);
      }
      return rates.get(from)!;
    },
  };
}

/** The rows' prices in the target currency; rows without a rate are left out. */
function convertedRows(rows: readonly (SummaryRow & { priceMinor: number })[], into: Conversion): SummaryRow[] {
  return rows.flatMap((row) => {
    const found = into.rateFrom(row.currency);
    return found ? [{ ...row, priceMinor: found.convert(row.priceMinor), currency: into.currency }] : [];
  });
}

/** The summary of offers (rows or views) with min/max over those that have a rate, in the target currency; the counts count all. */
export function summariseIn(rows: readonly (SummaryRow & { priceMinor: number })[], into: Conversion): SummaryView {
  const { offer_count, in_stock_count } = summarise(rows);
  return { ...summarise(convertedRows(rows, into)), currency: into.currency, offer_count, in_stock_count };
}

/**
 * Every offer gains `converted` (null without a rate for its currency); the summary ranges over the converted offers
 * (all now comparable), in the target currency; offer_count and in_stock_count still count every offer.
 */
function convertProduct(view: ProductView, into: Conversion): ProductView {
  const target = into.currency;
  const rows: SummaryRow[] = [];
  const offers = view.offers.map((offer): OfferView => {
    const found = into.rateFrom(offer.currency);
    if (!found || !into.day) return { ...offer, converted: null };
    const price = found.convert(parseMoney(offer.price, offer.currency));
    rows.push({ priceMinor: price, currency: target, inStock: offer.in_stock, competitorId: offer.competitor_id });
    const total = offer.total_price === null ? null : formatMoney(found.convert(parseMoney(offer.total_price, offer.currency)), target);
    const converted = {
      currency: target,
      price: formatMoney(price, target),
      total_price: total,
      rate: found.text,
      rate_date: into.day.date,
    };
    return { ...offer, converted };
  });
  const { offer_count, in_stock_count } = view.summary;
  return { ...view, offers, summary: { ...summarise(rows), currency: target, offer_count, in_stock_count } };
}

/** A product's JSON text (a snapshot line), converted. */
export const convertProductJson = (json: string, into: Conversion) => JSON.stringify(convertProduct(JSON.parse(json) as ProductView, into));
