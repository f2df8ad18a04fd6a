import { and, lt, sql } from "drizzle-orm";
import pLimit from "p-limit";
import { type ArchivedHistoryRow, mergeHistory, readHistoryYear } from "../catalogue/history-archive.ts";
import type { EventMessage } from "../events/messages.ts";
import { HISTORY_IN_D1_MS } from "../events/retention.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import type { Database } from "../platform/db.ts";
import { priceHistory, products } from "../platform/tables.ts";
import { DAY_MS } from "../platform/time.ts";
import { type AlertRule, type AlertSubject, historyWindows, matchesAlert } from "./rules.ts";

/**
 * Gathers what the rules need to know beyond the event (the product's brand and category, the offer's
 * prior prices) and asks src/alerts/rules.ts. The fan-out (events × webhooks), the replay (events × one
 * webhook) and the stream (events × its query) all call `matchAlerts`, so they cannot disagree.
 *
 * Cost: at most three D1 round trips for any number of events and rules: one read of the products'
 * brand and category (only when a rule names brands or categories), one batch of prior-price
 * statements (only for pairs that pass every other rule and ask for new_low_days or new_high_days),
 * and, for windows reaching back past the history D1 keeps, one read of their products' rows beside
 * one R2 read per product-year: per page of events, never per event.
 */

/** An event as the queue, the outbox and the feed hold it. `change`: the price change in minor units (null: not comparable). */
export interface AlertEvent {
  id: string;
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
  change?: { old_minor: number; new_minor: number } | null | undefined;
}

/** The queue's and the outbox's form of an event, as the rules read it. */
export const alertEventOf = (message: EventMessage): AlertEvent => ({ ...message.event, change: message.price_change });

/** Prior-price questions per statement: one JSON parameter each, far below D1's statement size. */
const PRIOR_CHUNK = 200;

const text = (value: unknown) => (typeof value === "string" ? value : undefined);

/**
 * Where the facts come from: the catalogue's D1 and archive (the default, from `{db, archive}`), or an account's
 * sandbox (src/sandbox/facts.ts), whose events are about its own products and history.
 */
export interface AlertFacts {
  products(ids: readonly string[]): Promise<Map<string, ProductFacts>>;
  priorPrices(questions: readonly PriorQuestion[]): Promise<Map<string, PriorAnswer>>;
}

const catalogueFacts = ({ db, archive }: { db: Database; archive: R2Bucket }): AlertFacts => ({
  products: (ids) => readProducts(db, ids),
  async priorPrices(asked) {
    // A window reaching back past the history D1 keeps is answered from the archive and D1 together.
    const horizon = new Date(Date.now() - HISTORY_IN_D1_MS).toISOString();
    const [recent, older] = await Promise.all([
      readPriorPrices(
        db,
        asked.filter((question) => question.since >= horizon),
      ),
      readArchivedPriorPrices(
        db,
        archive,
        asked.filter((question) => question.since < horizon),
      ),
    ]);
    return new Map([...recent, ...older]);
  },
});

/** The pairs (event, rule) that match, in event order, then rule order. */
export async function matchAlerts<E extends AlertEvent, R extends AlertRule>(
  source: { db: Database; archive: R2Bucket } | AlertFacts,
  { events, rules }: { events: readonly E[]; rules: readonly R[] },
): Promise<{ event: E; rule: R }[]> {
  if (events.length === 0 || rules.length === 0) return [];
  const facts = "priorPrices" in source ? source : catalogueFacts(source);
  const needsProduct = rules.some((rule) => rule.filters?.brands !== undefined || rule.filters?.categories !== undefined);
  const productFacts = needsProduct
    ? await facts.products(events.map((event) => text(event.data.product_id)).filter((id) => id !== undefined))
    : new Map<string, ProductFacts>();
  const subjects = events.map((event) => subjectOf(event, productFacts.get(text(event.data.product_id) ?? "")));
  const candidates = events.flatMap((event, index) =>
    rules.filter((rule) => matchesAlert(subjects[index]!, rule, "unchecked")).map((rule) => ({ index, event, rule })),
  );
  const questions = new Map<string, PriorQuestion>();
  for (const { index, rule } of candidates) {
    for (const days of historyWindows(subjects[index]!, rule)) {
      const question = priorQuestion(events[index]!, subjects[index]!, days);
      if (question) questions.set(question.k, question);
    }
  }
  const answers = questions.size === 0 ? new Map<string, PriorAnswer>() : await facts.priorPrices([...questions.values()]);
  return candidates
    .filter(({ index, event, rule }) => {
      const windows = historyWindows(subjects[index]!, rule);
      if (windows.length === 0) return true;
      return matchesAlert(subjects[index]!, rule, new Map(windows.map((days) => [days, answers.get(questionKey(event.id, days)) ?? null])));
    })
    .map(({ event, rule }) => ({ event, rule }));
}

function subjectOf(event: AlertEvent, product: ProductFacts | undefined): AlertSubject {
  return {
    type: event.type,
    currency: text(event.data.currency),
    oldMinor: event.change?.old_minor ?? null,
    newMinor: event.change?.new_minor ?? null,
    competitorId: text(event.data.competitor_id),
    sku: text(event.data.sku),
    brand: product?.brand,
    category: product?.category,
  };
}

interface ProductFacts {
  brand: string | null;
  category: string | null;
}

async function readProducts(db: Database, ids: readonly string[]): Promise<Map<string, ProductFacts>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ id: products.id, brand: products.brand, category: products.category })
    .from(products)
    .where(sql`${products.id} IN (SELECT value FROM json_each(${JSON.stringify([...new Set(ids)])}))`);
  return new Map(rows.map((row) => [row.id, row]));
}

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

const questionKey = (eventId: string, days: number) => `${eventId}/${days}`;

function priorQuestion(event: AlertEvent, subject: AlertSubject, days: number): PriorQuestion | undefined {
  const [productId, observedAt] = [text(event.data.product_id), text(event.data.observed_at)];
  if (!productId || !observedAt || !subject.competitorId || !subject.currency || Number.isNaN(Date.parse(observedAt))) return undefined;
  const before = new Date(observedAt).toISOString();
  return {
    k: questionKey(event.id, days),
    p: productId,
    c: subject.competitorId,
    cur: subject.currency,
    since: new Date(Date.parse(before) - days * DAY_MS).toISOString(),
    before,
  };
}

/**
 * One statement answers up to PRIOR_CHUNK questions: the lowest and highest price in the window, and
 * the price the offer held when the window opened (its last history row before `since`, if in the
 * same currency): a price that did not change during the window was still a price of the window.
 */
const PRIOR_PRICES = `SELECT q.value ->> 'k' AS k,
  (SELECT min(h.price_minor) FROM price_history h WHERE h.product_id = q.value ->> 'p' AND h.competitor_id = q.value ->> 'c'
    AND h.currency = q.value ->> 'cur' AND h.observed_at >= q.value ->> 'since' AND h.observed_at < q.value ->> 'before') AS low,
  (SELECT max(h.price_minor) FROM price_history h WHERE h.product_id = q.value ->> 'p' AND h.competitor_id = q.value ->> 'c'
    AND h.currency = q.value ->> 'cur' AND h.observed_at >= q.value ->> 'since' AND h.observed_at < q.value ->> 'before') AS high,
  (SELECT CASE WHEN h.currency = q.value ->> 'cur' THEN h.price_minor END FROM price_history h
    WHERE h.product_id = q.value ->> 'p' AND h.competitor_id = q.value ->> 'c' AND h.observed_at < q.value ->> 'since'
    ORDER BY h.observed_at DESC, h.id DESC LIMIT 1) AS opening
FROM json_each(?) q`;

type PriorRow = { k: string; low: number | null; high: number | null; opening: number | null };

async function readPriorPrices(
  db: Database,
  questions: readonly PriorQuestion[],
): Promise<Map<string, { low: number; high: number } | null>> {
  if (questions.length === 0) return new Map();
  const d1 = (db as Database & { $client: D1Database }).$client; // the (counting) binding drizzle wraps
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < questions.length; i += PRIOR_CHUNK)
    statements.push(d1.prepare(PRIOR_PRICES).bind(JSON.stringify(questions.slice(i, i + PRIOR_CHUNK))));
  const results = await d1.batch<PriorRow>(statements);
  const answers = new Map<string, { low: number; high: number } | null>();
  for (const row of results.flatMap((result) => result.results)) {
    const prices = [row.low, row.high, row.opening].filter((price) => price !== null);
    answers.set(row.k, prices.length === 0 ? null : { low: Math.min(...prices), high: Math.max(...prices) });
  }
  return answers;
}

/**
 * The same answers, for questions whose window opens before the history D1 surely still holds
 * (HISTORY_IN_D1_MS): from the offer's rows in D1 and in the product's archive objects (the window's
 * years and the one before, for the opening price), merged by id. Answered for the page at once, so
 * its cost does not grow with its events: one D1 query for every question's products, and each
 * product-year object read once (at most MAX_OPEN_CONNECTIONS at a time).
 */
async function readArchivedPriorPrices(db: Database, archive: R2Bucket, questions: readonly PriorQuestion[]) {
  const answers = new Map<string, { low: number; high: number } | null>();
  if (questions.length === 0) return answers;
  const yearsOf = (question: PriorQuestion) => {
    const years: string[] = [];
    for (let year = Number(question.since.slice(0, 4)) - 1; year <= Number(question.before.slice(0, 4)); year++) years.push(String(year));
    return years;
  };
  const objectKey = (productId: string, year: string) => `${productId}/${year}`;
  const objects = new Map(questions.flatMap((q) => yearsOf(q).map((year) => [objectKey(q.p, year), { productId: q.p, year }] as const)));
  const limit = pLimit(MAX_OPEN_CONNECTIONS);
  const [inD1, ...archivedYears] = await Promise.all([
    db
      .select()
      .from(priceHistory)
      .where(
        and(
          sql`${priceHistory.productId} IN (SELECT value FROM json_each(${JSON.stringify([...new Set(questions.map((q) => q.p))])}))`,
          lt(
            priceHistory.observedAt,
            questions.reduce((latest, q) => (q.before > latest ? q.before : latest), ""),
          ),
        ),
      ),
    ...[...objects.values()].map(({ productId, year }) => limit(() => readHistoryYear(archive, productId, year))),
  ]);
  const archivedOf = new Map([...objects.keys()].map((key, index) => [key, archivedYears[index]!]));
  for (const question of questions) {
    const archived = yearsOf(question).flatMap((year) => archivedOf.get(objectKey(question.p, year))!);
    answers.set(
      question.k,
      priorAnswer(
        question,
        mergeHistory(
          archived,
          inD1.filter((row) => row.productId === question.p),
        ),
      ),
    );
  }
  return answers;
}

/** A question answered from the product's history rows (oldest first), as PRIOR_PRICES answers it in SQL. */
export function priorAnswer(question: PriorQuestion, history: readonly ArchivedHistoryRow[]): PriorAnswer {
  const rows = history.filter((row) => row.competitorId === question.c && row.observedAt < question.before);
  const opening = rows.filter((row) => row.observedAt < question.since).at(-1);
  const prices = rows.filter((row) => row.observedAt >= question.since && row.currency === question.cur).map((row) => row.priceMinor);
  if (opening && opening.currency === question.cur) prices.push(opening.priceMinor);
  return prices.length === 0 ? null : { low: Math.min(...prices), high: Math.max(...prices) };
}
