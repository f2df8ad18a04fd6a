import { sql } from "drizzle-orm";
import type { EventMessage } from "../events/messages.ts";
import type { Database } from "../platform/db.ts";
import { parseMoney } from "../platform/money.ts";
import { products } from "../platform/tables.ts";
import { DAY_MS } from "../platform/time.ts";
import { type AlertRule, type AlertSubject, historyWindows, matchesAlert } from "./rules.ts";
import { catalogueWindowAnswers, type PriorAnswer, type PriorQuestion } from "./windows.ts";

/**
 * Gathers what the rules need to know beyond the event (the product's brand and category, the offer's
 * prior prices) and asks src/alerts/rules.ts. The fan-out (events × webhooks), the replay (events × one
 * webhook) and the stream (events × its query) all call `matchAlerts`, so they cannot disagree.
 *
 * Cost: at most three D1 round trips for any number of events and rules: one read of the products'
 * brand and category (only when a rule names brands or categories), one batch reading the offers' D1 history
 * rows and, for windows reaching back past the history D1 keeps, one reading their days in the alert windows' own
 * database (src/alerts/windows.ts; no archive object), only for pairs that pass every other rule and ask for
 * new_low_days or new_high_days: per page of events, never per event, whatever its products.
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

const text = (value: unknown) => (typeof value === "string" ? value : undefined);

/**
 * Where the facts come from: the catalogue's D1 (the default, from `{db, alerts}`: the main database and the alert
 * windows' own), or an account's
 * sandbox (src/sandbox/facts.ts), whose events are about its own products and history.
 */
export interface AlertFacts {
  products(ids: readonly string[]): Promise<Map<string, ProductFacts>>;
  priorPrices(questions: readonly PriorQuestion[]): Promise<Map<string, PriorAnswer>>;
}

/** The catalogue's databases: the main one and the alert windows' own (ALERTS_DB). */
export interface CatalogueDatabases {
  db: Database;
  alerts: Database;
}

export const catalogueFacts = ({ db, alerts }: CatalogueDatabases): AlertFacts => ({
  products: (ids) => readProducts(db, ids),
  priorPrices: (questions) => catalogueWindowAnswers({ db, alerts }, questions),
});

/** The pairs (event, rule) that match, in event order, then rule order. */
export async function matchAlerts<E extends AlertEvent, R extends AlertRule>(
  source: CatalogueDatabases | AlertFacts,
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

/** An amount of the event's data in minor units; null when absent (null, or an event from before the field). */
function minorOf(event: AlertEvent, field: string): number | null {
  const [amount, currency] = [text(event.data[field]), text(event.data.currency)];
  return amount === undefined || currency === undefined ? null : parseMoney(amount, currency);
}

function subjectOf(event: AlertEvent, product: ProductFacts | undefined): AlertSubject {
  return {
    type: event.type,
    currency: text(event.data.currency),
    oldMinor: event.change?.old_minor ?? null,
    newMinor: event.change?.new_minor ?? null,
    oldTotalMinor: minorOf(event, "old_total_price"),
    newTotalMinor: minorOf(event, "new_total_price"),
    lowestMinor: minorOf(event, "lowest_price_30d"),
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
