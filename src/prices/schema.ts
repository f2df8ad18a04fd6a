import { z } from "zod";
import { DATE_OR_DATE_TIME, isoTimestamp } from "../http/query.ts";
import { jsonObject, required } from "../http/validation.ts";
import { currencySchema, moneyFieldsFit, moneyStringSchema } from "../platform/money.ts";

/** POST /admin/observations: what it takes and what it answers, declared once. */

export const MAX_OBSERVATIONS = 1000;

/** How far ahead of the server's clock an observed_at may be (clock skew), so a wrong date cannot freeze an offer. */
const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;

/** A non-space character somewhere: what is left after trimming is not empty. */
const NOT_BLANK = "\\S";

const text = (max: number) =>
  z
    .string({ error: required("string") })
    .trim()
    .min(1, { error: "must not be empty" })
    .max(max, { error: `must be at most ${max} characters` })
    .meta({ pattern: NOT_BLANK, description: "Surrounding spaces are trimmed; must not be blank. The length counts UTF-16 code units (an emoji counts twice)" });
const optionalText = (max: number) => text(max).nullable().optional();
const optionalMoney = moneyStringSchema.nullable().optional();

export const observation = z
  .strictObject(
    {
      sku: text(100),
      name: text(500),
      brand: optionalText(200),
      category: optionalText(200),
      gtin: z.string({ error: required("string") }).regex(/^\d{8,14}$/, { error: "must be 8 to 14 digits" }).nullable().optional(),
      mpn: optionalText(100),
      competitor: z.strictObject(
        {
          id: z
            .string({ error: required("string") })
            .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, { error: 'must be 1-64 letters, digits, "_", "." or "-", such as "cmp_amazon"' }),
          name: text(200),
          domain: optionalText(253),
        },
        jsonObject,
      ),
      url: z
        .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
        .max(2048, { error: "must be at most 2048 characters" })
        .meta({ pattern: "^https?://", description: "The offer's page: an http(s) URL" })
        .nullable()
        .optional(),
      price: moneyStringSchema,
      regular_price: optionalMoney,
      currency: currencySchema,
      shipping_cost: optionalMoney,
      in_stock: z.boolean({ error: (issue) => (issue.input === undefined ? "is required" : "must be true or false") }),
      observed_at: isoTimestamp
        .refine((at) => Date.parse(at) <= Date.now() + MAX_CLOCK_SKEW_MS, { error: "must not be in the future" })
        .optional()
        .meta({ ...DATE_OR_DATE_TIME, description: "When the price was seen: an ISO-8601 date or date-time, at most 5 minutes ahead of the server's clock; now by default" }),
    },
    jsonObject,
  )
  .superRefine(moneyFieldsFit(["price", "regular_price", "shipping_cost"]));

export const observationsBody = z.strictObject(
  {
    observations: z
      .array(observation, { error: (issue) => (issue.input === undefined ? "is required" : "must be an array of observations") })
      .min(1, { error: "must hold at least one observation" })
      .max(MAX_OBSERVATIONS, { error: `must hold at most ${MAX_OBSERVATIONS.toLocaleString("en-US")} observations; split them into several calls` }),
  },
  jsonObject,
);


export type Observation = z.output<typeof observation>;

export const IngestionSummary = z
  .object({ received: z.int(), products_created: z.int(), offers_created: z.int(), price_changes: z.int(), stock_changes: z.int() })
  .meta({ id: "IngestionResult" });
export type IngestionResult = z.infer<typeof IngestionSummary>;
