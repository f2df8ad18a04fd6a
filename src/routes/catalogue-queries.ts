import { z } from "zod";

/** A parameter given twice arrives as an array (the router keeps every value): say so rather than pick one. */
const single = { error: (issue: { input?: unknown }) => (Array.isArray(issue.input) ? "must be given once" : undefined) };

/**
 * A UTC instant in, a canonical `toISOString()` string out, so it compares as text with the stored
 * timestamps. A date alone means midnight UTC.
 */
export const isoTimestamp = z
  .string()
  .refine((s) => (z.iso.datetime({ offset: true }).safeParse(s).success || z.iso.date().safeParse(s).success) && !Number.isNaN(Date.parse(s)), {
    error: "must be an ISO-8601 date or date-time, e.g. 2026-01-31 or 2026-01-31T12:00:00Z",
  })
  .transform((s) => new Date(s).toISOString());

const filterValue = z.string(single).min(1, { error: "must not be empty" }).max(200, { error: "must be at most 200 characters" });

/**
 * Unknown parameters are refused (400 naming them) rather than ignored: a misspelt filter would
 * otherwise silently return the whole catalogue.
 */
function strictQuery<Shape extends z.ZodRawShape>(shape: Shape) {
  const allowed = Object.keys(shape);
  const accepted = allowed.length ? `this route accepts ${allowed.join(", ")}` : "this route takes no query parameters";
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === "unrecognized_keys" ? `unknown query parameter ${issue.keys.map((k) => JSON.stringify(k)).join(", ")}; ${accepted}` : undefined,
  });
}

const when = (description: string) => z.string(single).pipe(isoTimestamp).optional().meta({ description: `${description}; an ISO-8601 date or date-time`, example: "2026-01-31T12:00:00Z" });

export const productsQuery = strictQuery({
  sku: filterValue.optional().meta({ description: "Exactly this SKU", example: "KET-1000" }),
  competitor: filterValue.optional().meta({ description: "Products with an offer from this competitor id (exact)", example: "cmp_amazon" }),
  brand: filterValue.optional().meta({ description: "Brand, case-insensitive", example: "Acme" }),
  category: filterValue.optional().meta({ description: "Category, case-insensitive", example: "Kettles" }),
  updated_since: when("Products whose updated_at is at or after this"),
});

export const historyQuery = strictQuery({
  competitor: filterValue.optional().meta({ description: "Only this competitor's rows", example: "cmp_amazon" }),
  from: when("From this instant, inclusive"),
  to: when("Up to this instant, exclusive"),
}).refine((q) => q.from === undefined || q.to === undefined || q.from < q.to, { path: ["to"], error: "must be later than from" });

export const noQuery = strictQuery({});
