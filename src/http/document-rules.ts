import type { z } from "zod";
import { CURRENCY_CODES, currencyExponent, MAX_MINOR_UNITS, moneyFieldsFit, moneyTotalFits } from "../platform/money.ts";

/**
 * The document's `x-rules` extension (docs/api-document.md): the rules a validator applies that JSON Schema cannot
 * state (they relate two fields, or a field and the server's clock), machine-readable, so a client generator or a
 * fuzzer sees them. A list on the object schema whose fields it names (a request body, or an object in one), or on
 * the operation for its query parameters. Each helper here adds the refinement and its rule together, so the
 * document cannot say less than the validator does. `field` is what a refusal's detail names.
 */
export type DocumentRule =
  /** When both are given, `field` is an instant later than `other`'s. */
  | { rule: "after"; field: string; other: string }
  /** When both are given, `field` is an instant earlier than `other`'s. */
  | { rule: "before"; field: string; other: string }
  /** `field` is after the server's clock when the request is read, at most `max_ahead_seconds` ahead. */
  | { rule: "future"; field: string; max_ahead_seconds: number }
  /** `field` is at most `tolerance_seconds` ahead of the server's clock (the clock skew allowed). */
  | { rule: "not-future"; field: string; tolerance_seconds: number }
  /** `field` needs `other` (a query's dependentRequired: query parameters are not one JSON Schema object). */
  | { rule: "requires"; field: string; other: string }
  /** `field` is an amount in the currency `currency` names: at most its minor-unit digits, at most `max_minor_units`. */
  | { rule: "money"; field: string; currency: string; max_minor_units: number }
  /** `field` + `other`, amounts in `currency`, is at most `max_minor_units`. */
  | { rule: "money-total"; field: string; other: string; currency: string; max_minor_units: number }
  /** The value the schema describes (no `field`), serialised as JSON (UTF-8), is at most `max_bytes` bytes. */
  | { rule: "max-json-bytes"; max_bytes: number };

/** Each rule in words: the document's description defines the extension with them. */
export const RULE_MEANINGS: Record<DocumentRule["rule"], string> = {
  after: "`after` (`field`, `other`): when both are given, `field` is a later instant than `other`",
  before: "`before` (`field`, `other`): when both are given, `field` is an earlier instant than `other`",
  future: "`future` (`field`, `max_ahead_seconds`): `field` is after the server's clock when the request is read, at most that far ahead",
  "not-future": "`not-future` (`field`, `tolerance_seconds`): `field` is at most that far ahead of the server's clock",
  requires: "`requires` (`field`, `other`): `field` needs `other` (dependentRequired, for query parameters)",
  money:
    "`money` (`field`, `currency`, `max_minor_units`): `field` is an amount in the currency the field `currency` names, with at " +
    "most its minor-unit digits and at most `max_minor_units` minor units",
  "money-total":
    "`money-total` (`field`, `other`, `currency`, `max_minor_units`): `field` + `other` is at most `max_minor_units` minor units",
  "max-json-bytes": "`max-json-bytes` (`max_bytes`): the value the schema describes, as JSON (UTF-8), is at most `max_bytes` bytes",
};

const RULES = "x-rules";

/** The rules `schema` carries (what the operation lifts from a query). */
export const documentRulesOf = (schema: z.ZodType): DocumentRule[] => (schema.meta()?.[RULES] as DocumentRule[] | undefined) ?? [];

function withRules<T extends z.ZodType>(schema: T, rules: DocumentRule[]): T {
  return schema.meta({ [RULES]: [...documentRulesOf(schema), ...rules] }) as T;
}

type Fields = Record<string, unknown>;
const instantOf = (value: unknown) => (typeof value === "string" ? Date.parse(value) : Number.NaN);

/** `field` must be a later instant than `other` when both are given; refused under `field`. */
export function later<T extends z.ZodType<Fields>>(schema: T, field: string, other: string): T {
  const refined = schema.refine((value) => !(instantOf(value[field]) <= instantOf(value[other])), {
    path: [field],
    error: `must be later than ${other}`,
  });
  return withRules(refined, [{ rule: "after", field, other }]);
}

/** `field` must be an earlier instant than `other` when both are given; refused under `field`. */
export function earlier<T extends z.ZodType<Fields>>(schema: T, field: string, other: string): T {
  const refined = schema.refine((value) => !(instantOf(value[field]) >= instantOf(value[other])), {
    path: [field],
    error: `must be before ${other}`,
  });
  return withRules(refined, [{ rule: "before", field, other }]);
}

/** `field`, when given, must be in the future and at most `maxAheadMs` ahead, judged when the request is read. */
export function inFuture<T extends z.ZodType<Fields>>(schema: T, field: string, maxAheadMs: number, maxAheadText: string): T {
  const refined = schema
    .refine((value) => value[field] === undefined || instantOf(value[field]) > Date.now(), {
      path: [field],
      error: "must be in the future",
    })
    .refine((value) => value[field] === undefined || instantOf(value[field]) <= Date.now() + maxAheadMs, {
      path: [field],
      error: `must be at most ${maxAheadText} ahead`,
    });
  return withRules(refined, [{ rule: "future", field, max_ahead_seconds: maxAheadMs / 1000 }]);
}

/** `field`, when given, must be at most `toleranceMs` ahead of the server's clock. */
export function notAhead<T extends z.ZodType<Fields>>(schema: T, field: string, toleranceMs: number): T {
  const refined = schema.refine((value) => value[field] === undefined || instantOf(value[field]) <= Date.now() + toleranceMs, {
    path: [field],
    error: "must not be in the future",
  });
  return withRules(refined, [{ rule: "not-future", field, tolerance_seconds: toleranceMs / 1000 }]);
}

/** The value must be at most `maxBytes` as JSON (UTF-8). */
export function maxJsonBytes<T extends z.ZodType>(schema: T, maxBytes: number, error: string): T {
  const utf8 = new TextEncoder();
  return withRules(
    schema.refine((value) => utf8.encode(JSON.stringify(value)).byteLength <= maxBytes, { error }),
    [{ rule: "max-json-bytes", max_bytes: maxBytes }],
  );
}

/** The currencies of each minor-unit exponent, from the platform's table, the fewest first (the longest list, USD's 2, last). */
const EXPONENT_GROUPS: [number, string[]][] = (() => {
  const groups = new Map<number, string[]>();
  for (const code of CURRENCY_CODES) groups.set(currencyExponent(code), [...(groups.get(currencyExponent(code)) ?? []), code]);
  return [...groups.entries()].sort(([, a], [, b]) => a.length - b.length);
})();

const amountPattern = (exponent: number) => (exponent === 0 ? "^\\d+$" : `^\\d+(\\.\\d{1,${exponent}})?$`);

/**
 * The minor-unit rule as JSON Schema: an if/then/else chain on `currency`, each branch giving `fields` the pattern of
 * its currencies' decimals (JPY none, USD 2, KWD 3, CLF 4). One chain, not an allOf, so generators that ignore if/then
 * see the object as before.
 */
function minorUnitsOf(fields: readonly string[], groups: [number, string[]][]): Fields {
  const [[exponent, codes], ...rest] = groups as [[number, string[]], ...[number, string[]][]];
  return ifThen(
    { properties: { currency: { enum: codes } }, required: ["currency"] },
    { properties: Object.fromEntries(fields.map((field) => [field, { pattern: amountPattern(exponent) }])) },
    rest.length === 0 ? undefined : minorUnitsOf(fields, rest),
  );
}

/** JSON Schema's if/then/else, as a schema's metadata. */
export const ifThen = (condition: Fields, consequence: Fields, otherwise?: Fields): Fields => ({
  if: condition,
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's keyword, in metadata that nothing awaits
  then: consequence,
  ...(otherwise && { else: otherwise }),
});

type Refinement = (value: never, ctx: z.RefinementCtx) => void;

/**
 * `fields` are amounts in the object's `currency`: `refinement` checks them (moneyFieldsFit, or a check that includes
 * it), and the document says so: in a body, each currency's decimals in JSON Schema (and `currency` required with any
 * amount, when `currencyRequired`); in a query, whose parameters share no schema, as `requires` rules; in both, a
 * `money` rule per field, which also says the 2^53-1 minor units JSON Schema cannot.
 */
export function amountsInCurrency<T extends z.ZodType<Fields>>(
  schema: T,
  fields: readonly string[],
  {
    where,
    currencyRequired = false,
    refinement = moneyFieldsFit(fields),
  }: { where: "body" | "query"; currencyRequired?: boolean; refinement?: Refinement },
): T {
  const refined = schema.superRefine(refinement as (value: Fields, ctx: z.RefinementCtx) => void);
  const stated =
    where === "body"
      ? refined.meta({
          ...minorUnitsOf(fields, EXPONENT_GROUPS),
          ...(currencyRequired && { dependentRequired: Object.fromEntries(fields.map((field) => [field, ["currency"]])) }),
        })
      : refined;
  return withRules(stated as T, [
    ...(where === "query" && currencyRequired ? fields.map((field) => ({ rule: "requires" as const, field, other: "currency" })) : []),
    ...fields.map((field) => ({ rule: "money" as const, field, currency: "currency", max_minor_units: MAX_MINOR_UNITS })),
  ]);
}

/** `field` + `other`, amounts in the object's `currency`, at most MAX_MINOR_UNITS (moneyTotalFits), and its rule. */
export function totalInCurrency<T extends z.ZodType<Fields>>(schema: T, field: string, other: string): T {
  return withRules(schema.superRefine(moneyTotalFits(field, other) as (value: Fields, ctx: z.RefinementCtx) => void), [
    { rule: "money-total", field, other, currency: "currency", max_minor_units: MAX_MINOR_UNITS },
  ]);
}
