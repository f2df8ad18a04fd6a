import { z } from "zod";
import { jsonObject } from "../http/validation.ts";
import { currency } from "../http/wire.ts";
import { CURRENCY_CODES, currencySchema, POSITIVE_DECIMAL_PATTERN } from "../platform/money.ts";

/** PUT /admin/fx-rates: a day's reference rates, declared once. */

const MAX_RATES = 200;

const FxRate = z
  .string({ error: 'must be a decimal string such as "1.0832" (a JSON number could lose precision)' })
  .max(24, { error: "must be at most 24 characters" })
  .regex(POSITIVE_DECIMAL_PATTERN, { error: 'must be a positive decimal string such as "1.0832"' })
  .optional()
  .meta({ id: "FxRate", description: "Units of this currency for one unit of base: a positive decimal string", example: "1.0832" });

/** One optional property per supported code, so the document lists them (and a client cannot send an unknown one). */
const rates = z
  .strictObject(Object.fromEntries(CURRENCY_CODES.map((code) => [code, FxRate])), {
    error: (issue) =>
      issue.code === "unrecognized_keys"
        ? `${issue.keys.join(", ")}: not a supported ISO-4217 currency code (use upper case, e.g. "USD")`
        : 'must be an object of currency codes to decimal strings, such as {"USD": "1.0832"}',
  })
  .refine((value) => Object.keys(value).length >= 1, { error: "must hold at least one rate" })
  .meta({ minProperties: 1, example: { USD: "1.0832", JPY: "162.45", KWD: "0.3331" } });

/**
 * The base's own rate is 1, so `rates` leaves it out: refused under rates.<base>, and stated in JSON Schema as "not
 * (base is X and rates holds X)" for each supported X, which a generator that ignores `not` reads as before.
 */
const baseLeftOut = <T extends z.ZodType<{ base: string; rates: Record<string, string | undefined> }>>(body: T) =>
  body
    .superRefine((value, ctx) => {
      if (value.rates[value.base] !== undefined)
        ctx.addIssue({ code: "custom", path: ["rates", value.base], message: "must be left out: the base's rate is 1", input: value.base });
    })
    .meta({
      not: {
        anyOf: CURRENCY_CODES.map((code) => ({
          properties: { base: { const: code }, rates: { required: [code] } },
          required: ["base", "rates"],
        })),
      },
    });

export const fxRatesBody = baseLeftOut(
  z.strictObject(
    {
      base: currencySchema.meta({ description: "The currency the rates are for one unit of", example: "EUR" }),
      date: z.iso
        .date({ error: "must be a date, YYYY-MM-DD" })
        .meta({ description: "The day the rates are for (YYYY-MM-DD); conversions use the latest day on or before today" }),
      rates: rates.meta({
        description: `Units of each currency for one unit of base, at most ${MAX_RATES} (every supported code once); not the base itself`,
      }),
    },
    jsonObject,
  ),
);
export type FxRatesBody = z.output<typeof fxRatesBody>;
/** What a PUT stores: only the rates given. */
export const givenRates = (body: FxRatesBody) =>
  Object.fromEntries(Object.entries(body.rates).filter((entry): entry is [string, string] => entry[1] !== undefined));

export const FxRates = z
  .object({
    base: z.string(),
    date: z.iso.date(),
    rates: z.record(z.string(), z.string()),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: "FxRates", description: "A day's reference rates as stored" });
export type FxRatesView = z.infer<typeof FxRates>;

export const LatestFxRates = z
  .object({
    base: currency.nullable().meta({ description: "The currency the rates are for one unit of; null before any rates are stored" }),
    date: z.iso.date().nullable().meta({ description: "The day of these rates: the latest on or before today (UTC); null before any" }),
    rates: z
      .record(z.string(), z.string())
      .meta({ description: "Units of each currency for one unit of base (decimal strings)", example: { USD: "1.0832", JPY: "162.45" } }),
    currencies: z.array(currency).meta({
      description: "Every currency `?currency=` converts into today: base and the currencies of rates, sorted; any other is refused (400)",
      example: ["EUR", "JPY", "USD"],
    }),
  })
  .meta({ id: "LatestFxRates", description: "The reference rates conversions use today" });
export type LatestFxRatesView = z.infer<typeof LatestFxRates>;
