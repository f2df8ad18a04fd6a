import type { MiddlewareHandler } from "hono";
import { z } from "zod";
import { ApiError } from "./errors.ts";

/** A parameter given twice arrives as an array (the router keeps every value): say so rather than pick one. */
export const single = { error: (issue: { input?: unknown }) => (Array.isArray(issue.input) ? "must be given once" : undefined) };

/**
 * A UTC instant in, a canonical `toISOString()` string out, so it compares as text with the stored
 * timestamps. A date alone means midnight UTC.
 */
export const isoTimestamp = z
  .string()
  .refine(
    (s) => (z.iso.datetime({ offset: true }).safeParse(s).success || z.iso.date().safeParse(s).success) && !Number.isNaN(Date.parse(s)),
    {
      // A date-time without an offset names no instant (whose 12:00?): the fix is one character, so it is said.
      error: (issue) =>
        typeof issue.input === "string" && z.iso.datetime({ local: true }).safeParse(issue.input).success
          ? `has no time zone: add Z for UTC or an offset such as +02:00 (e.g. ${issue.input}Z)`
          : "must be an ISO-8601 date or date-time, e.g. 2026-01-31 or 2026-01-31T12:00:00Z",
    },
  )
  .transform((s) => new Date(s).toISOString());

/** What isoTimestamp accepts, as the API document says it (the API's one ISO-8601 rule, for every field and parameter). */
export const DATE_OR_DATE_TIME = {
  anyOf: [
    { type: "string", format: "date", description: "A date alone (YYYY-MM-DD): midnight UTC" },
    { type: "string", format: "date-time", description: "An RFC 3339 date-time with Z or an offset (e.g. 2026-01-31T12:00:00Z)" },
  ],
};

/**
 * A whole-number query parameter: digits only (`notDigits` otherwise; given twice, "must be given once"), then `range`
 * (a zod integer with its bounds and messages). Parsed as a preprocess step, so the document states the parameter
 * as `range` says it (`type: integer` with its minimum and maximum) while a query string's text is what arrives.
 */
export const wholeNumberParameter = <T extends z.ZodType<number>>(notDigits: string, range: T) =>
  z.preprocess((raw, ctx) => {
    if (typeof raw === "string" && /^\d+$/.test(raw)) return Number(raw);
    ctx.issues.push({ code: "custom", input: raw, message: Array.isArray(raw) ? "must be given once" : notDigits });
    return z.NEVER;
  }, range);

export const filterValue = z.string(single).min(1, { error: "must not be empty" }).max(200, { error: "must be at most 200 characters" });

/**
 * Unknown parameters are refused (400 naming them) rather than ignored: a misspelt filter would
 * otherwise silently return the whole catalogue.
 */
export function strictQuery<Shape extends z.ZodRawShape>(shape: Shape) {
  const allowed = Object.keys(shape);
  const accepted = allowed.length ? `this route accepts ${allowed.join(", ")}` : "this route takes no query parameters";
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === "unrecognized_keys"
        ? `unknown query parameter ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}; ${accepted}`
        : undefined,
  });
}

export const when = (description: string, example: string) =>
  z
    .string(single)
    .pipe(isoTimestamp)
    .optional()
    .meta({ ...DATE_OR_DATE_TIME, description: `${description}; an ISO-8601 date or date-time`, example });

export const noQuery = strictQuery({});

/**
 * `?=x` names no parameter, so no route's schema would see it (the router drops it): refused for
 * every route here, as any other parameter a route does not take.
 */
export const namedQueryParameters: MiddlewareHandler = async (c, next) => {
  const url = c.req.url;
  if ((url.includes("?=") || url.includes("&=")) && new URL(url).searchParams.has(""))
    throw new ApiError(400, 'Invalid query: a parameter has no name ("?=…"); remove it or name it.');
  await next();
};
