import { z } from "zod";

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

const filterValue = z.string().min(1, { error: "must not be empty" }).max(200, { error: "must be at most 200 characters" });

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

export const productsQuery = strictQuery({
  sku: filterValue.optional(),
  competitor: filterValue.optional(),
  brand: filterValue.optional(),
  category: filterValue.optional(),
  updated_since: isoTimestamp.optional(),
});

export const historyQuery = strictQuery({
  competitor: filterValue.optional(),
  from: isoTimestamp.optional(),
  to: isoTimestamp.optional(),
}).refine((q) => q.from === undefined || q.to === undefined || q.from < q.to, { path: ["to"], error: "must be later than from" });

export const noQuery = strictQuery({});
