import { z } from "zod";
import { PriceDirection } from "../events/schema.ts";
import { amountsInCurrency, maxJsonBytes } from "../http/document-rules.ts";
import { required } from "../http/validation.ts";
import { currencySchema, moneyFieldsFit, moneyStringSchema } from "../platform/money.ts";

/**
 * Alert rules (`filters`): what a webhook (POST/PATCH /webhooks) or a stream (GET /events/stream)
 * takes beyond the event types. Declared once; src/alerts/rules.ts decides them. Every rule given must
 * hold. On stock.changed only the four lists apply.
 */

export const MAX_LIST_ENTRIES = 1000;
export const MAX_WINDOW_DAYS = 365;
/** A webhook's rules as JSON (UTF-8): the fan-out reads a candidate's rules whole, so they stay small. */
export const MAX_FILTERS_BYTES = 16 * 1024;

/** The fields whose amounts are in `currency`. */
export const MONEY_RULES = ["min_change_abs", "price_below", "price_above"] as const;

export const scopeValue = z
  .string({ error: required("string") })
  .min(1, { error: "must not be empty" })
  .max(200, { error: "must be at most 200 characters" });

const MAX_LIST_TEXT = MAX_LIST_ENTRIES.toLocaleString("en");

const scopeList = (what: string, example: string) =>
  z
    .array(scopeValue, { error: required("array") })
    .min(1, { error: "must hold at least one value (leave the field out to match any)" })
    .max(MAX_LIST_ENTRIES, { error: `must hold at most ${MAX_LIST_TEXT} values` })
    .meta({
      description: `Only events of these ${what} (exact match, at most ${MAX_LIST_TEXT}); applies to stock.changed too`,
      example: [example],
    });

const windowDays = (description: string) =>
  z
    .int({ error: `must be a whole number of days from 1 to ${MAX_WINDOW_DAYS}` })
    .min(1, { error: `must be from 1 to ${MAX_WINDOW_DAYS}` })
    .max(MAX_WINDOW_DAYS, { error: `must be from 1 to ${MAX_WINDOW_DAYS}` })
    .meta({ description, example: 30 });

const amount = (description: string, example: string) => moneyStringSchema.optional().meta({ description, example });

/** Which figure the money rules compare: a named enum, one type in a generated client. */
const PriceFigure = z.enum(["price", "total_price"], { error: "must be price or total_price" }).meta({
  id: "PriceFigure",
  description:
    "Which figure direction, min_change_abs, price_below and price_above compare: price (the default) or total_price (price + " +
    "shipping; an event whose total is unknown, while shipping is, does not match a money rule)",
  example: "total_price",
});

export const alertFilterFields = {
  // The component alone (its description says what the rule does): a description beside it would inline a copy.
  direction: PriceDirection.optional(),
  currency: currencySchema.optional().meta({
    description:
      "The currency of min_change_abs, price_below and price_above (required with any of them); events in another currency do not match",
    example: "USD",
  }),
  min_change_abs: amount(
    "Only price changes of at least this amount either way: 1.00 sends 10.00 → 8.99 and 10.00 → 11.00, not 10.00 → 10.99",
    "1.00",
  ),
  price_below: amount(
    "A crossing downwards: old_price ≥ this and new_price < it. 20.00 sends 20.00 → 19.99 and 25.00 → 18.00, not " +
      "19.99 → 19.50 (already below) nor 25.00 → 20.00; a price hovering around the target fires once per crossing",
    "20.00",
  ),
  price_above: amount(
    "A crossing upwards: old_price ≤ this and new_price > it. 30.00 sends 30.00 → 30.01 and 25.00 → 31.00, not 31.00 " +
      "→ 32.00 (already above) nor 25.00 → 30.00",
    "30.00",
  ),
  new_low_days: windowDays(
    "A new N-day low: new_price is below every price this offer had in the N days before the change (the price it " +
      "held when the window opened included). 30 sends 12.00 → 9.00 when the offer was never 9.00 or less in 30 days",
  ).optional(),
  new_high_days: windowDays("A new N-day high: new_price is above every price this offer had in the N days before the change").optional(),
  compare: PriceFigure.optional(),
  below_lowest_30d: z
    .boolean({ error: "must be true or false" })
    .optional()
    .meta({
      description:
        "true: only a price.changed whose new_price is below the offer's lowest_price_30d (the lowest price of the 30 days " +
        "before the change: the EU's prior price), so a reduction that is a real one. 30 days at 12.00, 10.00, 11.00 then " +
        "9.50 sends the 9.50 (below 10.00), not 11.00 → 10.50",
      example: true,
    }),
  competitors: scopeList("competitors (competitor_id)", "cmp_amazon").optional(),
  brands: scopeList("brands (the product's brand now)", "Acme").optional(),
  categories: scopeList("categories (the product's category now)", "Headphones").optional(),
  skus: scopeList("SKUs", "SKU-12345").optional(),
};

/** `currency` is required with any amount, and each amount must fit it: for webhook bodies and the stream's query alike. */
export const requireCurrency = (
  value: { currency?: string | undefined } & Partial<Record<(typeof MONEY_RULES)[number], string | undefined>>,
  ctx: z.RefinementCtx,
) => {
  const given = MONEY_RULES.filter((field) => value[field] !== undefined);
  if (given.length === 0) return;
  if (value.currency === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["currency"],
      message: `is required with ${given.join(", ")} (the currency the amounts are in)`,
      input: undefined,
    });
    return;
  }
  moneyFieldsFit(MONEY_RULES)({ ...value, currency: value.currency }, ctx);
};

const alertFiltersObject = maxJsonBytes(
  amountsInCurrency(
    z.strictObject(alertFilterFields, { error: (issue) => (issue.code === "invalid_type" ? "must be a JSON object or null" : undefined) }),
    MONEY_RULES,
    { where: "body", currencyRequired: true, refinement: requireCurrency },
  ),
  MAX_FILTERS_BYTES,
  `must be at most 16 KiB (${MAX_FILTERS_BYTES.toLocaleString("en")} bytes) as JSON`,
);

export const alertFilters = alertFiltersObject.nullable().meta({
  id: "AlertFilters",
  description:
    "Alert rules; every rule given must hold (null: none). Amounts are decimal strings in `currency`, with no more " +
    "decimals than its minor unit (JPY none, USD 2, KWD 3). On " +
    `stock.changed only competitors, brands, categories and skus apply. At most 16 KiB (${MAX_FILTERS_BYTES.toLocaleString("en")} ` +
    "bytes) as JSON (UTF-8); larger is a 400.",
  example: { direction: "down", currency: "USD", price_below: "20.00", competitors: ["cmp_amazon"] },
});
export type AlertFilters = z.output<typeof alertFiltersObject>;
