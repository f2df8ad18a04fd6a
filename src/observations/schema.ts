import { z } from "zod";
import { competitorDomain, competitorId, competitorName, OfferCondition, QuantityUnit } from "../catalogue/schema.ts";
import { amountsInCurrency, notAhead, totalInCurrency } from "../http/document-rules.ts";
import { DATE_OR_DATE_TIME, isoTimestamp } from "../http/query.ts";
import { uriSchema } from "../http/uri.ts";
import { jsonObject, required, trimmedText } from "../http/validation.ts";
import { currencySchema, moneyStringSchema, POSITIVE_DECIMAL_PATTERN } from "../platform/money.ts";

/** POST /admin/observations: what it takes and what it answers, declared once. */

export const MAX_OBSERVATIONS = 1000;

/** How far ahead of the server's clock an observed_at may be (clock skew), so a wrong date cannot freeze an offer. */
const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;

const optionalText = (max: number) => trimmedText(max).nullable().optional();
const optionalMoney = moneyStringSchema.nullable().optional();

/** What names the offer checked: every observation carries these, whatever its check_status. */
const observed = {
  sku: trimmedText(100),
  name: trimmedText(500),
  brand: optionalText(200),
  category: optionalText(200),
  gtin: z
    .string({ error: required("string") })
    .regex(/^\d{8,14}$/, { error: "must be 8 to 14 digits" })
    .nullable()
    .optional(),
  mpn: optionalText(100),
  competitor: z.strictObject({ id: competitorId, name: competitorName, domain: competitorDomain.optional() }, jsonObject),
  url: uriSchema("The offer's page: an http(s) URL", ["http", "https"]).nullable().optional(),
  // At most MAX_CLOCK_SKEW_MS ahead: observedNotAhead, on each shape.
  observed_at: isoTimestamp.optional().meta({
    ...DATE_OR_DATE_TIME,
    description: "When the price was seen: an ISO-8601 date or date-time, at most 5 minutes ahead of the server's clock; now by default",
  }),
};

/** What a check that read the page tells about the offer beside its price. */
const offerTerms = {
  seller: optionalText(200).meta({ description: "Who sells it on the competitor's site (a marketplace seller), up to 200 characters" }),
  condition: OfferCondition.optional(),
  quantity: z
    .string({ error: required("string") })
    .max(16, { error: "must be at most 16 characters" })
    .regex(POSITIVE_DECIMAL_PATTERN, { error: 'must be a positive decimal string such as "500" or "0.75"' })
    .optional()
    .meta({
      description: "How much the price buys, in `unit` (required with it): a positive decimal string; the unit price's divisor",
      example: "500",
    }),
  unit: QuantityUnit.optional(),
};

/** `quantity` and `unit` come together: one without the other cannot make a unit price. */
function quantityWithUnit(value: { quantity?: string | undefined; unit?: string | undefined }, ctx: z.RefinementCtx) {
  if ((value.quantity === undefined) === (value.unit === undefined)) return;
  const missing = value.quantity === undefined ? "quantity" : "unit";
  const given = missing === "quantity" ? "unit" : "quantity";
  ctx.addIssue({ code: "custom", path: [missing], message: `is required with ${given} (both or neither)`, input: undefined });
}
const bothOrNeither = { dependentRequired: { quantity: ["unit"], unit: ["quantity"] } };

const observedNotAhead = <T extends z.ZodType<Record<string, unknown>>>(shape: T) => notAhead(shape, "observed_at", MAX_CLOCK_SKEW_MS);

const CHECK_STATUS_ERROR = "must be ok, not_found or blocked";

const pricedObservationFields = z.strictObject(
  {
    ...observed,
    ...offerTerms,
    check_status: z
      .literal("ok", { error: CHECK_STATUS_ERROR })
      .optional()
      .meta({ description: "ok (the default): the check read a price" }),
    price: moneyStringSchema.meta({
      description: `${moneyStringSchema.description}; with shipping_cost, the total (price + shipping_cost) too, else 400 naming price`,
    }),
    regular_price: optionalMoney,
    currency: currencySchema,
    shipping_cost: optionalMoney.meta({
      description:
        "Delivery to the shop's home market; 0 is free delivery, absent or null unknown (then total_price is null); price + " +
        "shipping_cost at most 2^53-1 minor units",
    }),
    in_stock: z.boolean({ error: (issue) => (issue.input === undefined ? "is required" : "must be true or false") }),
  },
  jsonObject,
);
const PricedObservation = observedNotAhead(
  // A total no view can show exactly would break every catalogue build and price change after it.
  totalInCurrency(
    amountsInCurrency(pricedObservationFields, ["price", "regular_price", "shipping_cost"], { where: "body" }),
    "price",
    "shipping_cost",
  ),
)
  .superRefine(quantityWithUnit)
  .meta({ id: "PricedObservation", description: "A check that read a price (check_status ok or absent)", ...bothOrNeither });

const FailedCheck = observedNotAhead(
  z.strictObject(
    {
      ...observed,
      check_status: z.enum(["not_found", "blocked"], { error: CHECK_STATUS_ERROR }).meta({
        description: "The check read no price: the offer keeps its price and stock, and shows this status",
      }),
    },
    {
      error: (issue) =>
        issue.code === "unrecognized_keys"
          ? `${issue.keys.join(", ")}: must be left out when check_status is not ok (a failed check carries no price, currency, ` +
            "in_stock, shipping_cost or other offer terms: only the product, competitor, url and observed_at)"
          : jsonObject.error(issue),
    },
  ),
).meta({
  id: "FailedCheck",
  description:
    "A check that read no price (not_found, blocked): it changes no price, stock or history and emits no event, and must " +
    "name an offer already known (else 400)",
});

/**
 * One of the two shapes, told apart by check_status. A union, not a discriminated one: an OpenAPI discriminator must be a
 * required property, and check_status may be left out (ok). A 400 names the field of the shape check_status chose
 * (src/http/validation.ts reads a union's failure so).
 */
const observation = z.union([PricedObservation, FailedCheck], { error: "must be a JSON object" });

export const observationsBody = z.strictObject(
  {
    observations: z
      .array(observation, { error: (issue) => (issue.input === undefined ? "is required" : "must be an array of observations") })
      .min(1, { error: "must hold at least one observation" })
      .max(MAX_OBSERVATIONS, {
        error: `must hold at most ${MAX_OBSERVATIONS.toLocaleString("en-US")} observations; split them into several calls`,
      }),
  },
  jsonObject,
);

export type Observation = z.output<typeof observation>;
export type PricedObservation = z.output<typeof PricedObservation>;
type FailedCheck = z.output<typeof FailedCheck>;
export const isFailedCheck = <O extends Observation>(observation: O): observation is O & FailedCheck =>
  observation.check_status === "not_found" || observation.check_status === "blocked";

export const IngestionResult = z
  .object({ received: z.int(), products_created: z.int(), offers_created: z.int(), price_changes: z.int(), stock_changes: z.int() })
  .meta({ id: "IngestionResult" });
export type IngestionResult = z.infer<typeof IngestionResult>;
