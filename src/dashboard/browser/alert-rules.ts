/**
 * A webhook's alert rules (`filters`, src/alerts/schema.ts) in the dashboard: read from and filled into the webhook
 * dialog's "Alert rules" fields (each named `filters.<rule>`, src/dashboard/page-dialogs.ts), and said in plain
 * words on the webhook's card, so a person sees why a webhook stays silent. The API checks the rules; its 400
 * comes back in the form's words (form-fields.ts).
 */
import type { components } from "../../../client/schema.d.ts";
import { el } from "./dom.ts";
import { listEntries } from "./form-fields.ts";

type Webhook = components["schemas"]["Webhook"];
type AlertFilters = NonNullable<Webhook["filters"]>;

const RULE_PREFIX = "filters.";

const ruleControls = (form: HTMLFormElement) =>
  form.querySelectorAll<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>(`[name^="${RULE_PREFIX}"]`);

/**
 * The rules the dialog's fields hold, null when all are empty. Values go to the API as typed (trimmed): a list
 * one entry a line, a number of days as a number when it is one, a currency in capitals; the API decides the rest.
 * A rule of `current` (the webhook being edited) that the form has no field for is kept as it is, so an edit
 * never drops a rule set through the API.
 */
export function readRules(form: HTMLFormElement, current: AlertFilters | null = null): AlertFilters | null {
  const fields = new Set([...ruleControls(form)].map((control) => control.name.slice(RULE_PREFIX.length)));
  const rules: Record<string, unknown> = Object.fromEntries(Object.entries(current ?? {}).filter(([rule]) => !fields.has(rule)));
  for (const control of ruleControls(form)) {
    const field = control.name.slice(RULE_PREFIX.length);
    if (control instanceof HTMLTextAreaElement) {
      const entries = listEntries(control).map((entry) => entry.value);
      if (entries.length) rules[field] = entries;
      continue;
    }
    const value = control.value.trim();
    if (!value) continue;
    if (control.inputMode === "numeric") rules[field] = /^\d+$/.test(value) ? Number(value) : value;
    else rules[field] = control.getAttribute("autocapitalize") === "characters" ? value.toUpperCase() : value;
  }
  return Object.keys(rules).length ? (rules as AlertFilters) : null;
}

/** Fills the dialog's rule fields from a webhook's rules (empty for none), and opens them when there are any. */
export function fillRules(form: HTMLFormElement, filters: AlertFilters | null): void {
  for (const control of ruleControls(form)) {
    const value = filters?.[control.name.slice(RULE_PREFIX.length) as keyof AlertFilters];
    control.value = value === undefined ? "" : Array.isArray(value) ? value.join("\n") : String(value);
  }
  form.querySelector<HTMLDetailsElement>("details.rules")!.open = filters !== null;
}

/** A list as a person reads it: the first few values, then how many more. */
function listed(values: readonly string[]): string {
  const SHOWN = 4;
  const more = values.length - SHOWN;
  return values.slice(0, SHOWN).join(", ") + (more > 0 ? ` and ${more} more` : "");
}

/** Each rule in words; the currency goes with the amounts (and alone only when no amount is set). */
const SAID: { [Rule in keyof AlertFilters]-?: (value: NonNullable<AlertFilters[Rule]>, rules: AlertFilters) => string } = {
  direction: (direction) => (direction === "down" ? "price goes down" : "price goes up"),
  currency: (currency, rules) => ((rules.min_change_abs ?? rules.price_below ?? rules.price_above) ? "" : `prices in ${currency}`),
  min_change_abs: (amount, rules) => `price changes by ${amount} ${rules.currency} or more`,
  price_below: (amount, rules) => `price falls below ${amount} ${rules.currency}`,
  price_above: (amount, rules) => `price rises above ${amount} ${rules.currency}`,
  new_low_days: (days) => `new ${days}-day low`,
  new_high_days: (days) => `new ${days}-day high`,
  compare: (figure) => (figure === "total_price" ? "amounts compare price + shipping" : ""),
  below_lowest_30d: (below) => (below ? "below the 30-day lowest price" : ""),
  brands: (values) => `brands: ${listed(values)}`,
  categories: (values) => `categories: ${listed(values)}`,
  competitors: (values) => `competitors: ${listed(values)}`,
  skus: (values) => `SKUs: ${listed(values)}`,
};

/** The rules that apply to stock changes too; the others compare prices. */
const LIST_RULES: ReadonlyArray<keyof AlertFilters> = ["brands", "categories", "competitors", "skus"];

/** A card's line on its rules: "Only when: price falls below 12.00 EUR · brands: Acme, Bosch · new 30-day low". */
export function rulesSummary(hook: Webhook): HTMLElement {
  const rules = hook.filters;
  if (!rules) return el("p", { class: "rules-summary hint" }, "No alert rules: it receives every event of its types.");
  const phrases = (Object.keys(SAID) as Array<keyof AlertFilters>)
    .filter((rule) => rules[rule] !== undefined)
    .map((rule) => (SAID[rule] as (value: unknown, all: AlertFilters) => string)(rules[rule], rules))
    .filter(Boolean);
  const priceOnly = (Object.keys(rules) as Array<keyof AlertFilters>).some((rule) => !LIST_RULES.includes(rule));
  const stockNote =
    priceOnly && hook.events.includes("stock.changed")
      ? el("span", { class: "hint" }, " (stock changes: only brands, categories, competitors and SKUs apply)")
      : null;
  return el("p", { class: "rules-summary" }, el("strong", {}, "Only when: "), phrases.join(" · "), stockNote);
}
