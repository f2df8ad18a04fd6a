import { parseMoney } from "../platform/money.ts";
import { ACCOUNT_EVENT_TYPES } from "../platform/tables.ts";
import { type AlertFilters, MONEY_RULES } from "./schema.ts";

/**
 * THE decision whether an event is wanted by a subscriber (a webhook, a stream): its event types,
 * `min_change_pct` and the alert rules. Pure: the fan-out, the replay and the stream gather the facts
 * (src/alerts/match.ts) and all ask this one function.
 */

/** What the rules look at in an event. Prices are minor units of `currency`. */
export interface AlertSubject {
  type: string;
  currency: string | undefined;
  /** Both null when the change cannot be measured (the currency changed); absent on other types. */
  oldMinor: number | null;
  newMinor: number | null;
  /** price + shipping before and after (null while shipping is unknown, or the currency changed): `compare: "total_price"`. */
  oldTotalMinor: number | null;
  newTotalMinor: number | null;
  /** The offer's lowest_price_30d at the change (null: none). */
  lowestMinor: number | null;
  competitorId: string | undefined;
  sku: string | undefined;
  /** The product's brand and category now (events do not carry them). */
  brand: string | null | undefined;
  category: string | null | undefined;
}

/** A subscriber's rules: types (all when absent), min_change_pct in basis points, the alert rules. */
export interface AlertRule {
  types?: readonly string[];
  minChangeBp: number;
  filters: AlertFilters | null;
}

/**
 * The offer's lowest and highest price in a window before the change (same currency), keyed by the
 * window's days; `null` for a window with no comparable price. "unchecked": the history rules are
 * left for a second pass (`historyWindows` says which windows it needs).
 */
export type PriorPrices = ReadonlyMap<number, { low: number; high: number } | null> | "unchecked";

/**
 * |new − old| / old ≥ min_change_pct, exactly; a change that cannot be measured (currency changed, or from 0) passes,
 * as before rules existed.
 */
export function meetsThreshold(minChangeBp: number, oldMinor: number | null, newMinor: number | null): boolean {
  if (minChangeBp === 0 || oldMinor === null || newMinor === null || oldMinor === 0) return true;
  return BigInt(Math.abs(newMinor - oldMinor)) * 10_000n >= BigInt(minChangeBp) * BigInt(oldMinor);
}

const inList = (list: readonly string[] | undefined, value: string | null | undefined) =>
  list === undefined || (value != null && list.includes(value));

/** The windows (days) whose prior prices `matchesAlert` needs for this subject and rule. */
export function historyWindows(subject: AlertSubject, rule: AlertRule): number[] {
  if (subject.type !== "price.changed" || !rule.filters) return [];
  return [rule.filters.new_low_days, rule.filters.new_high_days].filter((days): days is number => days !== undefined);
}

/** direction, min_change_abs, price_below and price_above over the figure `compare` names; an unknown total matches none. */
function meetsMoneyRules(filters: AlertFilters, [before, after]: [number | null, number | null]): boolean {
  if (before === null || after === null) return false;
  if (filters.direction === "up" && !(after > before)) return false;
  if (filters.direction === "down" && !(after < before)) return false;
  // The schema requires currency with any amount, and the subject is in that currency (checked before).
  const amount = (value: string | undefined) => (value === undefined ? undefined : parseMoney(value, filters.currency!));
  const [minAbs, below, above] = [amount(filters.min_change_abs), amount(filters.price_below), amount(filters.price_above)];
  if (minAbs !== undefined && Math.abs(after - before) < minAbs) return false;
  if (below !== undefined && !(before >= below && after < below)) return false;
  if (above !== undefined && !(before <= above && after > above)) return false;
  return true;
}

export function matchesAlert(subject: AlertSubject, rule: AlertRule, prior: PriorPrices): boolean {
  if (rule.types && !rule.types.includes(subject.type)) return false;
  // An account event (its owner decided before: src/webhooks/delivery/rows.ts, replay) is about keys and webhooks, not products.
  if ((ACCOUNT_EVENT_TYPES as readonly string[]).includes(subject.type)) return true;
  const filters = rule.filters ?? {};
  if (!inList(filters.competitors, subject.competitorId) || !inList(filters.skus, subject.sku)) return false;
  if (!inList(filters.brands, subject.brand) || !inList(filters.categories, subject.category)) return false;
  if (subject.type !== "price.changed") return true;
  const { oldMinor: before, newMinor: after } = subject;
  if (!meetsThreshold(rule.minChangeBp, before, after)) return false;
  if (filters.currency !== undefined && subject.currency !== filters.currency) return false;
  const moneyRules = [filters.direction, ...MONEY_RULES.map((field) => filters[field])].some((rule) => rule !== undefined);
  const comparesPrices = moneyRules || [filters.new_low_days, filters.new_high_days, filters.below_lowest_30d].some((rule) => rule);
  if (!comparesPrices) return true;
  if (before === null || after === null) return false; // the currency changed: no rule can compare the prices
  if (filters.below_lowest_30d && !(subject.lowestMinor !== null && after < subject.lowestMinor)) return false;
  if (
    moneyRules &&
    !meetsMoneyRules(filters, filters.compare === "total_price" ? [subject.oldTotalMinor, subject.newTotalMinor] : [before, after])
  )
    return false;
  if (prior === "unchecked") return true;
  const range = (days: number) => {
    const found = prior.get(days);
    if (found === undefined) throw new Error(`prior prices for ${days} days were not gathered (historyWindows names them)`);
    return found;
  };
  if (filters.new_low_days !== undefined && !(after < Math.min(before, range(filters.new_low_days)?.low ?? before))) return false;
  if (filters.new_high_days !== undefined && !(after > Math.max(before, range(filters.new_high_days)?.high ?? before))) return false;
  return true;
}
