import { crossRate, formatRate, minorConverter, type RateDay } from "../fx-rates/rates.ts";
import { sha256Hex } from "../platform/hash.ts";
import { formatMoney, parseMoney } from "../platform/money.ts";
import type { SummaryView } from "./schema.ts";
import { type SummaryRow, type summarise, summariseRows, summaryRow } from "./views.ts";

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

/** A source currency's cross rate: shown, as one exact step from its minor units to the target's, and as an offer's `converted`. */
interface FromCurrency {
  text: string;
  convert(minor: number): number | bigint;
  /** The offer's `converted` as JSON text, from its price and total_price already converted and formatted. */
  convertedJson(price: string, total: string | null): string;
}

/** An amount (or null) as JSON.stringify writes it: a money string holds nothing to escape. */
const moneyJson = (amount: string | null) => (amount === null ? "null" : `"${amount}"`);

/** What names the day's rates a conversion uses, in a list's ETag and in the converted pieces' keys: new rates, a new name. */
export const ratesTag = (conversion: Conversion) => sha256Hex(JSON.stringify(conversion.day), 8);

export function conversionInto(currency: string, day: RateDay | null): Conversion {
  const rates = new Map<string, FromCurrency | null>();
  const opening = `{"currency":${JSON.stringify(currency)},"price":"`;
  return {
    currency,
    day,
    rateFrom(from) {
      if (!rates.has(from)) {
        const rate = day && crossRate(day, from, currency);
        if (!day || !rate) rates.set(from, null);
        else {
          const text = formatRate(rate);
          const closing = `,"rate":${JSON.stringify(text)},"rate_date":${JSON.stringify(day.date)}}`;
          rates.set(from, {
            text,
            convert: minorConverter(from, currency, rate),
            convertedJson: (price, total) => `${opening}${price}","total_price":${moneyJson(total)}${closing}`,
          });
        }
      }
      return rates.get(from)!;
    },
  };
}

/** The rows' price and total in the target currency (each converted, as an offer's `converted` has them); rows without a rate are left out. */
function convertedRows(rows: readonly SummaryRow[], into: Conversion): SummaryRow[] {
  return rows.flatMap((row) => {
    const found = into.rateFrom(row.currency);
    if (!found) return [];
    const convert = (minor: number | bigint) => found.convert(Number(minor));
    return [
      {
        ...row,
        priceMinor: convert(row.priceMinor),
        totalMinor: row.totalMinor === null ? null : convert(row.totalMinor),
        currency: into.currency,
      },
    ];
  });
}

/** The summary of offers' rows with min/max and lowest_offer over those that have a rate, in the target currency; the counts count all. */
export function summariseIn(offers: Parameters<typeof summarise>[0], into: Conversion): SummaryView {
  const rows = offers.map(summaryRow);
  const { offer_count, in_stock_count } = summariseRows(rows);
  return { ...summariseRows(convertedRows(rows, into)), currency: into.currency, offer_count, in_stock_count };
}

/*
 * A product's JSON text is converted in place, not parsed and written again (a converted list converts every product
 * of the catalogue). The text is JSON.stringify's of a ProductView, whose fields come in a fixed order; a field is found
 * by its key as JSON.stringify writes it, after a comma. A string value holds a quote only escaped, so `,"price":"`
 * is the field itself wherever it is found, and searching on from the previous field stays inside the offer.
 */
const OFFERS = ',"offers":[';
const COMPETITOR_ID = '{"competitor_id":';
const COMPETITOR_NAME = ',"competitor_name":';
const PRICE = ',"price":"';
const CURRENCY = ',"currency":"';
const TOTAL_PRICE = ',"total_price":';
const IN_STOCK = ',"in_stock":';
const CHECKED_AT = ',"checked_at":"';
const SUMMARY = ',"summary":';
const OFFER_COUNT = ',"offer_count":';
const LOWEST_COMPETITOR = ',"lowest_competitor_id":';
const LOWEST_OFFER = ',"lowest_offer":';
const SUMMARY_END = '},"created_at":"';

/** A text not shaped as a ProductView's: a field added to or moved in the view needs this reading changed too. */
const notAProductView = (what: string) => new Error(`convertProductJson: ${what} is not where a ProductView has it`);

/** Where the value of the field `key` (one of the above) starts, searching from `from`. */
function valueAfter(json: string, key: string, from: number): number {
  const at = json.indexOf(key, from);
  if (at < 0) throw notAProductView(key);
  return at + key.length;
}

/** The end of the string value starting at `at` (its closing quote): the values read here (money, codes, timestamps) hold no escape. */
const stringEnd = (json: string, at: number) => json.indexOf('"', at);

/**
 * A product's JSON text (a snapshot line), converted: every offer gains `converted` (null without a rate for its
 * currency); the summary (min/max and lowest_offer) ranges over the converted offers (all now comparable), in the target currency; offer_count
 * and in_stock_count still count every offer. The same text as JSON.stringify of the converted view.
 */
export function convertProductJson(json: string, into: Conversion): string {
  const target = into.currency;
  // Each converted offer as the summary sees it; its competitorId is the id's JSON text, put back as it is.
  const rows: SummaryRow[] = [];
  let at = valueAfter(json, OFFERS, 0);
  // Pieces joined once at the end: `+=` would make a deep rope that costs more to flatten than the conversion itself.
  const out = [json.slice(0, at)];
  while (json.startsWith("{", at)) {
    if (!json.startsWith(COMPETITOR_ID, at)) throw notAProductView(COMPETITOR_ID);
    const priceAt = valueAfter(json, PRICE, at);
    const currencyAt = valueAfter(json, CURRENCY, priceAt);
    const currency = json.slice(currencyAt, stringEnd(json, currencyAt));
    const totalAt = valueAfter(json, TOTAL_PRICE, currencyAt);
    const inStockAt = valueAfter(json, IN_STOCK, totalAt);
    const end = stringEnd(json, valueAfter(json, CHECKED_AT, inStockAt)) + 1;
    if (!json.startsWith("}", end)) throw notAProductView("an offer's end");
    const found = into.rateFrom(currency);
    let converted = "null";
    if (found) {
      const price = found.convert(parseMoney(json.slice(priceAt, stringEnd(json, priceAt)), currency));
      const total = json.startsWith("null", totalAt)
        ? null
        : found.convert(parseMoney(json.slice(totalAt + 1, stringEnd(json, totalAt + 1)), currency));
      converted = found.convertedJson(formatMoney(price, target), total === null ? null : formatMoney(total, target));
      const competitorId = json.slice(at + COMPETITOR_ID.length, json.indexOf(COMPETITOR_NAME, at));
      rows.push({ priceMinor: price, totalMinor: total, currency: target, inStock: json.startsWith("true", inStockAt), competitorId });
    }
    out.push(json.slice(at, end), ',"converted":', converted, "}");
    at = end + 1;
    if (json.startsWith(",", at)) {
      out.push(",");
      at++;
    }
  }
  if (!json.startsWith("]", at)) throw notAProductView("the offers' end");
  const summaryAt = valueAfter(json, SUMMARY, at);
  const countsAt = valueAfter(json, OFFER_COUNT, summaryAt) - OFFER_COUNT.length;
  const lowestAt = valueAfter(json, LOWEST_COMPETITOR, countsAt) - LOWEST_COMPETITOR.length;
  const restAt = valueAfter(json, SUMMARY_END, lowestAt) - SUMMARY_END.length + 1;
  const { min_price, max_price, lowest_competitor_id, lowest_offer } = summariseRows(rows);
  // The ids are the offers' JSON text, put back as they are.
  const lowestOffer = lowest_offer
    ? `{"competitor_id":${lowest_offer.competitor_id},"price":${moneyJson(lowest_offer.price)},` +
      `"total_price":${moneyJson(lowest_offer.total_price)},"currency":${JSON.stringify(target)}}`
    : "null";
  const summary =
    `{"min_price":${moneyJson(min_price)},"max_price":${moneyJson(max_price)},"currency":${JSON.stringify(target)}` +
    `${json.slice(countsAt, lowestAt)}${LOWEST_COMPETITOR}${lowest_competitor_id ?? "null"}${LOWEST_OFFER}${lowestOffer}}`;
  out.push(json.slice(at, summaryAt), summary, json.slice(restAt));
  return out.join("");
}
