import { z } from "zod";
import { competitorDomain, competitorId, competitorName } from "../catalogue/schema.ts";
import { DATE_OR_DATE_TIME, isoTimestamp } from "../http/query.ts";
import { uriSchema } from "../http/uri.ts";
import { jsonObject, required, trimmedText } from "../http/validation.ts";
import { currencySchema, moneyFieldsFit, moneyStringSchema } from "../platform/money.ts";

/** POST /admin/observations: what it takes and what it answers, declared once. */

export const MAX_OBSERVATIONS = 1000;

/** How far ahead of the server's clock an observed_at may be (clock skew), so a wrong date cannot freeze an offer. */
const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;

const optionalText = (max: number) => trimmedText(max).nullable().optional();
const optionalMoney = moneyStringSchema.nullable().optional();

const observation = z
  .strictObject(
    {
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
      price: moneyStringSchema,
      regular_price: optionalMoney,
      currency: currencySchema,
      shipping_cost: optionalMoney,
      in_stock: z.boolean({ error: (issue) => (issue.input === undefined ? "is required" : "must be true or false") }),
      observed_at: isoTimestamp
        .refine((at) => Date.parse(at) <= Date.now() + MAX_CLOCK_SKEW_MS, { error: "must not be in the future" })
        .optional()
        .meta({
          ...DATE_OR_DATE_TIME,
          description:
            "When the price was seen: an ISO-8601 date or date-time, at most 5 minutes ahead of the server's clock; now by default",
        }),
    },
    jsonObject,
  )
  .superRefine(moneyFieldsFit(["price", "regular_price", "shipping_cost"]));

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

export const IngestionResult = z
  .object({ received: z.int(), products_created: z.int(), offers_created: z.int(), price_changes: z.int(), stock_changes: z.int() })
  .meta({ id: "IngestionResult" });
export type IngestionResult = z.infer<typeof IngestionResult>;
