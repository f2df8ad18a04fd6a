import { z } from "zod";
import {
  type AlertFilters,
  alertFilterFields,
  MAX_LIST_ENTRIES,
  MAX_WINDOW_DAYS,
  MONEY_RULES,
  requireCurrency,
  scopeValue,
} from "../alerts/schema.ts";
import { eventsQuery } from "../events/query.ts";
import { amountsInCurrency } from "../http/document-rules.ts";
import { single, strictQuery, wholeNumberParameter } from "../http/query.ts";
import { moneyStringSchema } from "../platform/money.ts";

/**
 * GET /events/stream's query: GET /events' own (`after`, `since`, `type`; not `limit`) plus the alert
 * rules of src/alerts/schema.ts as parameters, lists repeated (`?brands=Acme&brands=Zeta`).
 */

const once = <T extends z.ZodType<unknown, string>>(schema: T) => z.string(single).pipe(schema);

const days = (field: "new_low_days" | "new_high_days") =>
  wholeNumberParameter(`must be a whole number of days from 1 to ${MAX_WINDOW_DAYS}`, alertFilterFields[field].unwrap()).optional();

const list = (field: "competitors" | "brands" | "categories" | "skus") =>
  z
    .union([scopeValue, z.array(scopeValue)])
    .transform((value) => [value].flat())
    .pipe(z.array(scopeValue).max(MAX_LIST_ENTRIES, { error: `must be given at most ${MAX_LIST_ENTRIES.toLocaleString("en")} times` }))
    .optional()
    .meta({ description: `${alertFilterFields[field].unwrap().description}; repeat the parameter for several` });

const { after, since, type } = eventsQuery.shape;

/** A flag's two spellings (an empty `?below_lowest_30d=` is neither). */
const FLAG = ["true", "false"] as const;

export const streamQuery = amountsInCurrency(
  strictQuery({
    after,
    since,
    type,
    direction: alertFilterFields.direction,
    currency: alertFilterFields.currency,
    min_change_abs: once(moneyStringSchema)
      .optional()
      .meta({ ...alertFilterFields.min_change_abs.meta(), pattern: "^\\d+(\\.\\d+)?$" }),
    price_below: once(moneyStringSchema)
      .optional()
      .meta({ ...alertFilterFields.price_below.meta(), pattern: "^\\d+(\\.\\d+)?$" }),
    price_above: once(moneyStringSchema)
      .optional()
      .meta({ ...alertFilterFields.price_above.meta(), pattern: "^\\d+(\\.\\d+)?$" }),
    new_low_days: days("new_low_days"),
    new_high_days: days("new_high_days"),
    compare: alertFilterFields.compare,
    below_lowest_30d: once(z.enum(FLAG, { error: "must be true or false" }).transform((value) => value === "true"))
      .optional()
      .meta({ enum: [...FLAG], description: alertFilterFields.below_lowest_30d.description }),
    competitors: list("competitors"),
    brands: list("brands"),
    categories: list("categories"),
    skus: list("skus"),
  }),
  MONEY_RULES,
  { where: "query", currencyRequired: true, refinement: requireCurrency },
);
export type StreamQuery = z.output<typeof streamQuery>;

/** The alert rules a stream's query names; null when it names none. */
export function streamFilters({ after: _after, since: _since, type: _type, ...rules }: StreamQuery): AlertFilters | null {
  const given = Object.fromEntries(Object.entries(rules).filter(([, value]) => value !== undefined));
  return Object.keys(given).length === 0 ? null : (given as AlertFilters);
}

/** `Last-Event-ID` (what EventSource sends on reconnecting) is `after`. */
export const lastEventIdHeader = z.object({
  "last-event-id": after.meta({
    description: "The last event id received: the stream resumes after it (as `after`; the query's `after` wins)",
  }),
});
