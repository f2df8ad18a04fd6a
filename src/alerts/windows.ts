import { HISTORY_IN_D1_MS } from "../events/retention.ts";
import type { Database } from "../platform/db.ts";
import { dayRow, farRow, type OfferDay, type OfferFar } from "./far-rows.ts";
import { dayNumber } from "./tables.ts";

/**
 * The answers to a page's window questions (new_low_days, new_high_days: the offer's lowest and highest price in a
 * window before a change), from rows read once for the page. Each offer's rows are indexed once (sorted, with sparse
 * tables of their extremes per currency), then each question costs a few binary searches: a page's work is
 * O(rows × log rows + questions × log rows), never questions × rows (a hub's publish of 300 changes × 160 windows
 * looked at 14 million history rows; docs/webhooks.md).
 *
 * Three kinds of row: a price history row (exact: a price and when it took effect); for history the archiver moved
 * out of price_history, an offer's day (src/alerts/tables.ts offerPriceDays: the day's lowest, highest and last price); and for
 * days older than any change the feed holds can end a window among, the offer's far row (offerPriceFar: its suffix
 * extremes by the last day each price was held, foldDays in src/alerts/far-rows.ts).
 */

/** "The offer's prices in [since, before), and the one it held at `since`", in `currency`. */
export interface PriorQuestion {
  k: string;
  p: string;
  c: string;
  cur: string;
  since: string;
  before: string;
}

/** The offer's lowest and highest price in the window (the opening price included); null: none comparable. */
export type PriorAnswer = { low: number; high: number } | null;

/** What answering looked at: each binary search's probe, each range lookup, each entry indexed. Read by the tests. */
export const windowWork = { steps: 0 };

/**
 * One indexed entry: `key` orders them (a time, or a day), then `lastAt` and `id` (rows of the same time keep their
 * commit order); `last` is the price held after it, from `lastAt`.
 */
interface Entry {
  key: string;
  id: number;
  currency: string;
  low: number;
  high: number;
  last: number;
  lastAt: string;
}

/** The first index whose key is ≥ `key` (keys sorted). */
function lowerBound(keys: readonly string[], key: string): number {
  let [lo, hi] = [0, keys.length];
  while (lo < hi) {
    windowWork.steps++;
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Range minimum and maximum in O(1) after O(n log n): level j holds the extremes of 2^j entries from each index. */
class SparseExtremes {
  private readonly lows: number[][];
  private readonly highs: number[][];

  constructor(lows: number[], highs: number[]) {
    this.lows = [lows];
    this.highs = [highs];
    for (let width = 1; 2 * width <= lows.length; width *= 2) {
      const [low, high] = [this.lows.at(-1)!, this.highs.at(-1)!];
      const size = low.length - width;
      windowWork.steps += size;
      this.lows.push(Array.from({ length: size }, (_, i) => Math.min(low[i]!, low[i + width]!)));
      this.highs.push(Array.from({ length: size }, (_, i) => Math.max(high[i]!, high[i + width]!)));
    }
  }

  /** The extremes of entries [from, to); null when empty. */
  range(from: number, to: number): PriorAnswer {
    if (from >= to) return null;
    windowWork.steps++;
    const level = 31 - Math.clz32(to - from);
    const other = to - (1 << level);
    return {
      low: Math.min(this.lows[level]![from]!, this.lows[level]![other]!),
      high: Math.max(this.highs[level]![from]!, this.highs[level]![other]!),
    };
  }
}

/** An offer's entries of one kind, sorted by key (then lastAt), with each currency's extremes. */
class Series {
  private readonly keys: string[];
  private readonly byCurrency = new Map<string, { keys: string[]; extremes: SparseExtremes }>();

  constructor(private readonly entries: Entry[]) {
    const text = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    entries.sort((a, b) => text(a.key, b.key) || text(a.lastAt, b.lastAt) || a.id - b.id);
    windowWork.steps += entries.length;
    this.keys = entries.map((entry) => entry.key);
    for (const currency of new Set(entries.map((entry) => entry.currency))) {
      const own = entries.filter((entry) => entry.currency === currency);
      this.byCurrency.set(currency, {
        keys: own.map((entry) => entry.key),
        extremes: new SparseExtremes(
          own.map((entry) => entry.low),
          own.map((entry) => entry.high),
        ),
      });
    }
  }

  /** The extremes of the entries in `currency` with keys in [from, to). */
  range(currency: string, from: string, to: string): PriorAnswer {
    const own = this.byCurrency.get(currency);
    return own ? own.extremes.range(lowerBound(own.keys, from), lowerBound(own.keys, to)) : null;
  }

  /** The price held after the last entry whose key is before `key` (any currency). */
  lastBefore(key: string): { at: string; currency: string; minor: number } | undefined {
    const entry = this.entries[lowerBound(this.keys, key) - 1];
    return entry && { at: entry.lastAt, currency: entry.currency, minor: entry.last };
  }
}

const merge = (...answers: PriorAnswer[]): PriorAnswer =>
  answers.reduce<PriorAnswer>(
    (sum, answer) =>
      answer === null ? sum : sum === null ? answer : { low: Math.min(sum.low, answer.low), high: Math.max(sum.high, answer.high) },
    null,
  );

const priceIn = (currency: string, held: { currency: string; minor: number } | undefined): PriorAnswer =>
  held && held.currency === currency ? { low: held.minor, high: held.minor } : null;

/** An offer's history rows as entries. */
interface HistoryPrice {
  id: number;
  observedAt: string;
  currency: string;
  priceMinor: number;
}

const exactEntry = (row: HistoryPrice): Entry => ({
  key: row.observedAt,
  id: row.id,
  currency: row.currency,
  low: row.priceMinor,
  high: row.priceMinor,
  last: row.priceMinor,
  lastAt: row.observedAt,
});

type OfferRow<T> = T & { productId: string; competitorId: string };

const offerKey = (productId: string, competitorId: string) => `${productId}\u0000${competitorId}`;

/** Groups rows by offer, once. */
function byOffer<T extends { productId: string; competitorId: string }>(rows: readonly T[]): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) {
    const key = offerKey(row.productId, row.competitorId);
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  return groups;
}

/**
 * Exact answers from history rows (the sandbox's): the prices in [since, before) in the question's currency, and the
 * price held when the window opened (the last row before `since`, if in that currency).
 */
export function exactAnswers(questions: readonly PriorQuestion[], rows: readonly OfferRow<HistoryPrice>[]): Map<string, PriorAnswer> {
  const offers = new Map([...byOffer(rows)].map(([key, own]) => [key, new Series(own.map(exactEntry))]));
  return new Map(
    questions.map((q) => {
      const history = offers.get(offerKey(q.p, q.c));
      return [q.k, history ? merge(history.range(q.cur, q.since, q.before), priceIn(q.cur, history.lastBefore(q.since))) : null];
    }),
  );
}

/**
 * Answers for windows that open before the history D1 surely holds: the window opens at 00:00 UTC of its first day,
 * whose whole prices count (an offer's days keep no finer time). Its days before the change's day come from the offer's
 * days, the rest from D1's rows; the price held when it opened is the later of the last day's close and D1's last row
 * before it. A change older than D1's history (a replay, a backfill) does not see prices its offer held earlier that
 * same day besides the one it changed from: its day's row holds later prices too, so it is left out.
 */
function dayAlignedAnswers(
  questions: readonly PriorQuestion[],
  days: readonly OfferRow<OfferDay>[],
  rows: readonly OfferRow<HistoryPrice>[],
  fars: readonly OfferRow<OfferFar>[],
): Map<string, PriorAnswer> {
  const dayEntry = (day: OfferDay): Entry => ({
    key: day.day,
    id: 0,
    currency: day.currency,
    low: day.lowMinor,
    high: day.highMinor,
    last: day.closeMinor,
    lastAt: day.closedAt,
  });
  const offerDays = new Map([...byOffer(days)].map(([key, own]) => [key, new Series(own.map(dayEntry))]));
  const offerRows = new Map([...byOffer(rows)].map(([key, own]) => [key, new Series(own.map(exactEntry))]));
  const offerFars = new Map(fars.map((far) => [offerKey(far.productId, far.competitorId), far]));
  const none = new Series([]);
  return new Map(
    questions.map((q) => {
      const [firstDay, lastDay] = [q.since.slice(0, 10), q.before.slice(0, 10)];
      const opens = `${firstDay}T00:00:00.000Z`;
      const [dayRows, exact] = [offerDays.get(offerKey(q.p, q.c)) ?? none, offerRows.get(offerKey(q.p, q.c)) ?? none];
      const far = offerFars.get(offerKey(q.p, q.c));
      const farClose = far && { at: far.closedAt, currency: far.closeCurrency, minor: far.closeMinor };
      const recent = merge(dayRows.range(q.cur, firstDay, lastDay), exact.range(q.cur, opens, q.before));
      // A window opening among the folded days: their extremes from its first day on, and the price held past them.
      if (far && firstDay < far.through) return [q.k, merge(recent, farExtremes(far, q.cur, firstDay), priceIn(q.cur, farClose))];
      const opening = [dayRows.lastBefore(firstDay), exact.lastBefore(opens), farClose].reduce((latest, held) =>
        held && (!latest || held.at > latest.at) ? held : latest,
      );
      return [q.k, merge(recent, priceIn(q.cur, opening))];
    }),
  );
}

/** The extremes of the folded prices held on `firstDay` or later: the first suffix minimum and maximum from it. */
function farExtremes(far: OfferFar, currency: string, firstDay: string): PriorAnswer {
  const own = far.extremes[currency];
  if (!own) return null;
  const from = (entries: [string, number][]) =>
    entries[
      lowerBound(
        entries.map(([day]) => day),
        firstDay,
      )
    ]?.[1];
  const [low, high] = [from(own.lows), from(own.highs)];
  return low === undefined || high === undefined ? null : { low, high };
}

/** Products or offers per statement: one JSON parameter each. */
const SPANS_PER_STATEMENT = 200;

/**
 * The catalogue's answers, in one D1 batch for any number of questions: each asked product's rows still in D1 before
 * its latest change (one index range; every row read is returned, its other offers' rows too) and, for the offers of
 * windows that open before the history D1 surely holds (HISTORY_IN_D1_MS), a second batch, in the alert windows' own
 * database: their days from the earliest such window's first day to the latest change's day (a primary key range), the
 * last day before that (one seek) and the offer's far row (one seek), in one statement. Windows within D1's history
 * are exact; longer ones day-aligned. No archive object is read, whatever the number of products.
 *
 * The days are read after the history rows, never at the same time: the archiver writes a moved row's day before it
 * deletes the row (src/catalogue/history-archive.ts), so a row gone from the first read is in the second.
 */
export async function catalogueWindowAnswers(
  { db, alerts }: { db: Database; alerts: Database },
  questions: readonly PriorQuestion[],
): Promise<Map<string, PriorAnswer>> {
  if (questions.length === 0) return new Map();
  const horizon = new Date(Date.now() - HISTORY_IN_D1_MS).toISOString();
  const [exact, dayAligned] = [questions.filter((q) => q.since >= horizon), questions.filter((q) => q.since < horizon)];
  /**
   * Each key's span of the questions (the earliest first day, the latest change), in JSON parameters of 200; its days
   * as the day rows store them (days since 1970-01-01).
   */
  const spans = (asked: readonly PriorQuestion[], keyOf: (q: PriorQuestion) => string) => {
    const spanned = new Map<string, { p: string; c: string; from: string; to: string; before: string }>();
    for (const q of asked) {
      const [from, to] = [q.since.slice(0, 10), q.before.slice(0, 10)];
      const span = spanned.get(keyOf(q));
      if (!span) spanned.set(keyOf(q), { p: q.p, c: q.c, from, to, before: q.before });
      else Object.assign(span, { from: min(span.from, from), to: max(span.to, to), before: max(span.before, q.before) });
    }
    const all = [...spanned.values()].map((span) => ({ ...span, from: dayNumber(span.from), to: dayNumber(span.to) }));
    return Array.from({ length: Math.ceil(all.length / SPANS_PER_STATEMENT) }, (_, i) =>
      JSON.stringify(all.slice(i * SPANS_PER_STATEMENT, (i + 1) * SPANS_PER_STATEMENT)),
    );
  };
  // The (counting) bindings drizzle wraps.
  const [d1, daysD1] = [db.$client, alerts.$client];
  const [productSpans, offerSpans] = [spans(questions, (q) => q.p), spans(dayAligned, (q) => offerKey(q.p, q.c))];
  const rows = (await d1.batch<Record<string, unknown>>(productSpans.map((json) => d1.prepare(PRODUCT_ROWS).bind(json)))).flatMap(
    (result) => result.results,
  ) as unknown as OfferRow<HistoryPrice>[];
  const daysAndFars =
    offerSpans.length === 0
      ? []
      : ((await daysD1.batch<Record<string, unknown>>(offerSpans.map((json) => daysD1.prepare(OFFER_DAYS).bind(json, json, json)))).flatMap(
          (result) => result.results,
        ) as unknown as DayOrFar[]);
  const days = daysAndFars.flatMap((row) => (row.extremes === null ? [dayRow(row)] : []));
  const fars = daysAndFars.flatMap((row) =>
    row.extremes === null
      ? []
      : [
          {
            ...farRow({ ...row, through: row.day, closeCurrency: row.currency, extremes: row.extremes }),
            productId: row.productId,
            competitorId: row.competitorId,
          },
        ],
  );
  return new Map([...exactAnswers(exact, rows), ...dayAlignedAnswers(dayAligned, days, rows, fars)]);
}

const min = (a: string, b: string) => (a < b ? a : b);
const max = (a: string, b: string) => (a > b ? a : b);

/**
 * A row of OFFER_DAYS as stored (integer days, Unix ms): an offer's day, or (with `extremes`) its far row, its
 * `through` as `day` and its close's currency.
 */
type DayOrFar = OfferRow<Omit<OfferDay, "day" | "closedAt"> & { day: number; closedAt: number }> & { extremes: string | null };

const DAY_COLUMNS = `d.product_id AS productId, d.competitor_id AS competitorId, d.day, d.currency, d.low_minor AS lowMinor,
  d.high_minor AS highMinor, d.close_minor AS closeMinor, d.closed_at AS closedAt, NULL AS extremes`;
const OFFER_DAYS = `SELECT ${DAY_COLUMNS} FROM json_each(?) q JOIN offer_price_days d
  ON d.product_id = q.value ->> 'p' AND d.competitor_id = q.value ->> 'c' AND d.day >= q.value ->> 'from' AND d.day < q.value ->> 'to'
UNION ALL
SELECT ${DAY_COLUMNS} FROM json_each(?) q JOIN offer_price_days d
  ON d.product_id = q.value ->> 'p' AND d.competitor_id = q.value ->> 'c' AND d.day = (SELECT max(e.day) FROM offer_price_days e
    WHERE e.product_id = q.value ->> 'p' AND e.competitor_id = q.value ->> 'c' AND e.day < q.value ->> 'from')
UNION ALL
SELECT f.product_id, f.competitor_id, f.through, f.close_currency, NULL, NULL, f.close_minor, f.closed_at, f.extremes
FROM json_each(?) q JOIN offer_price_far f ON f.product_id = q.value ->> 'p' AND f.competitor_id = q.value ->> 'c'`;
const PRODUCT_ROWS = `SELECT h.id, h.product_id AS productId, h.competitor_id AS competitorId, h.observed_at AS observedAt,
  h.currency, h.price_minor AS priceMinor
FROM json_each(?) q JOIN price_history h ON h.product_id = q.value ->> 'p' AND h.observed_at < q.value ->> 'before'`;
