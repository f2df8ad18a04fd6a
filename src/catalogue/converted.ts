import { convertMinor, crossRate, formatRate, type RateDay } from "../fx-rates/rates.ts";
import { formatMoney, parseMoney } from "../platform/money.ts";
import type { OfferView, ProductView, SummaryView } from "./schema.ts";
import { type SummaryRow, summarise } from "./views.ts";

/**
 * `?currency=` (GET /products, GET /products/{id}, the MCP product tools): a product's view with each offer's
 * `converted` and the summary's min/max in the target currency. Applied to the view as served (the snapshot's line,
 * or D1's row made into a view), so every path gives the same answer.
 */

function convertedOffer(offer: OfferView, day: RateDay | null, target: string): OfferView["converted"] {
  const rate = day && crossRate(day, offer.currency, target);
  if (!day || !rate) return null;
  const convert = (amount: string) => formatMoney(convertMinor(parseMoney(amount, offer.currency), offer.currency, target, rate), target);
  return {
    currency: target,
    price: convert(offer.price),
    total_price: offer.total_price === null ? null : convert(offer.total_price),
    rate: formatRate(rate),
    rate_date: day.date,
  };
}

/**
 * Every offer gains `converted` (null without a rate for its currency); the summary ranges over the converted offers
 * (all now comparable), in `target`; offer_count and in_stock_count still count every offer.
 */
export function convertProduct(view: ProductView, day: RateDay | null, target: string): ProductView {
  const rows = view.offers.map((offer) => ({
    priceMinor: parseMoney(offer.price, offer.currency),
    currency: offer.currency,
    inStock: offer.in_stock,
    competitorId: offer.competitor_id,
  }));
  return {
    ...view,
    offers: view.offers.map((offer) => ({ ...offer, converted: convertedOffer(offer, day, target) })),
    summary: summariseIn(rows, day, target),
  };
}

/** The summary of offers (rows or views) with min/max over those that have a rate, in `target`; the counts count all. */
export function summariseIn(rows: readonly (SummaryRow & { priceMinor: number })[], day: RateDay | null, target: string): SummaryView {
  const converted = rows.flatMap((row) => {
    const rate = day && crossRate(day, row.currency, target);
    return rate ? [{ ...row, priceMinor: convertMinor(row.priceMinor, row.currency, target, rate), currency: target }] : [];
  });
  const { offer_count, in_stock_count } = summarise(rows);
  return { ...summarise(converted), currency: target, offer_count, in_stock_count };
}

/** A product's JSON text (a snapshot line), converted. */
export const convertProductJson = (json: string, day: RateDay | null, target: string) =>
  JSON.stringify(convertProduct(JSON.parse(json) as ProductView, day, target));
