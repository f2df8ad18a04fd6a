import { dayNumber, dayText, type offerPriceFar } from "./tables.ts";

/**
 * An offer's days and its far row as the alert windows compare them (days as YYYY-MM-DD, times as ISO text), as
 * offer_price_days and offer_price_far store them (integer days, Unix ms: src/alerts/tables.ts), and the fold of the
 * first into the second (the history archiver's, src/catalogue/history-archive.ts).
 */

/** An offer's day as offer_price_days keeps it, its day as YYYY-MM-DD and its close's time as ISO text (dayRow reads a stored one). */
export interface OfferDay {
  day: string;
  currency: string;
  lowMinor: number;
  highMinor: number;
  closeMinor: number;
  closedAt: string;
}

/** An offer's far row: its days before `through` folded (foldDays), and the price it held then; days as YYYY-MM-DD. */
export interface OfferFar {
  through: string;
  extremes: Record<string, { lows: [string, number][]; highs: [string, number][] }>;
  closeMinor: number;
  closeCurrency: string;
  closedAt: string;
}

type StoredFar = Omit<typeof offerPriceFar.$inferSelect, "productId" | "competitorId">;
type Extremes<Day> = Record<string, { lows: [Day, number][]; highs: [Day, number][] }>;
const mapDays = <From, To>(extremes: Extremes<From>, day: (from: From) => To): Extremes<To> =>
  Object.fromEntries(
    Object.entries(extremes).map(([currency, own]) => [
      currency,
      { lows: own.lows.map(([at, minor]) => [day(at), minor]), highs: own.highs.map(([at, minor]) => [day(at), minor]) },
    ]),
  );

/** A stored day row (integer day, Unix ms) as the windows compare it. */
export const dayRow = <T extends { day: number; closedAt: number }>(
  row: T,
): Omit<T, "day" | "closedAt"> & { day: string; closedAt: string } => ({
  ...row,
  day: dayText(row.day),
  closedAt: new Date(row.closedAt).toISOString(),
});

/** A stored far row (its extremes' JSON text or value) as the windows read it. */
export const farRow = (row: Omit<StoredFar, "extremes"> & { extremes: string | StoredFar["extremes"] }): OfferFar => ({
  ...row,
  through: dayText(row.through),
  closedAt: new Date(row.closedAt).toISOString(),
  extremes: mapDays(typeof row.extremes === "string" ? (JSON.parse(row.extremes) as StoredFar["extremes"]) : row.extremes, dayText),
});

/** A far row as offer_price_far stores it. */
export const storedFar = (far: OfferFar): StoredFar => ({
  ...far,
  through: dayNumber(far.through),
  closedAt: Date.parse(far.closedAt),
  extremes: mapDays(far.extremes, dayNumber),
});

/**
 * Folds an offer's days (before `through`) into its far row: each price enters its currency's suffix minima and
 * maxima under the last day it was held (a day's prices on that day; the price held before them up to it), so the
 * extremes of the prices held on a day or later are the first entry from that day: the `prior_prices` algorithm
 * (src/observations/prior-prices.ts) run over days. Entries last held before `oldest` go: no window reaches them.
 */
export function foldDays(far: OfferFar | undefined, days: readonly OfferDay[], through: string, oldest: string): OfferFar | undefined {
  const extremes = structuredClone(far?.extremes ?? {});
  const enter = (currency: string, day: string, low: number, high: number) => {
    const own = (extremes[currency] ??= { lows: [], highs: [] });
    // A day folded late (a back-filled row) is entered no earlier than what is there, which keeps the order.
    const tail = own.lows.at(-1)?.[0];
    const last = tail !== undefined && tail > day ? tail : day;
    while (own.lows.length > 0 && own.lows.at(-1)![1] >= low) own.lows.pop();
    own.lows.push([last, low]);
    while (own.highs.length > 0 && own.highs.at(-1)![1] <= high) own.highs.pop();
    own.highs.push([last, high]);
  };
  let close = far && { minor: far.closeMinor, currency: far.closeCurrency, at: far.closedAt };
  for (const day of [...days].sort((a, b) => (a.day < b.day ? -1 : a.day > b.day ? 1 : a.closedAt < b.closedAt ? -1 : 1))) {
    if (close) enter(close.currency, day.day, close.minor, close.minor);
    enter(day.currency, day.day, day.lowMinor, day.highMinor);
    if (!close || day.closedAt >= close.at) close = { minor: day.closeMinor, currency: day.currency, at: day.closedAt };
  }
  if (!close) return undefined;
  for (const [currency, own] of Object.entries(extremes)) {
    own.lows = own.lows.filter(([day]) => day >= oldest);
    own.highs = own.highs.filter(([day]) => day >= oldest);
    if (own.lows.length === 0) delete extremes[currency];
  }
  return { through, extremes, closeMinor: close.minor, closeCurrency: close.currency, closedAt: close.at };
}
