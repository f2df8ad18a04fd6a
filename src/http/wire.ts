import { z } from "zod";
import { MONEY_PATTERN } from "../platform/money.ts";
import { DAY_SECONDS } from "../platform/time.ts";

/**
 * The primitives every response shape is built from, declared once. Request-side validation of the
 * same things (which says more, and why) is in src/platform/money.ts and src/http/query.ts.
 */

/**
 * A response field holding a named component (an enum) or null, documented as `anyOf: [$ref, {type: "null"}]`, which
 * generated clients turn into that one type or None. (zod's `.nullable()` of a component comes out as a copy of the
 * enum with null added, which generators turn into a class of its own at every use.)
 */
export const orNull = <T extends z.ZodType>(component: T) => z.union([component, z.null()]);

export const timestamp = z.iso.datetime().meta({ description: "UTC, ISO-8601", example: "2026-01-31T12:00:00.000Z" });

const MONEY_DESCRIPTION = "A decimal string with the currency's own minor-unit digits, never a float";
export const money = z.string().regex(MONEY_PATTERN).meta({ description: MONEY_DESCRIPTION, example: "14.99" });
/** A difference of two amounts, so it may be negative. */
export const signedMoney = z
  .string()
  .regex(/^-?\d+(\.\d+)?$/)
  .meta({ description: `${MONEY_DESCRIPTION}; negative for a fall`, example: "-1.50" });

export const currency = z
  .string()
  .regex(/^[A-Z]{3}$/)
  .meta({ description: "ISO-4217", example: "USD" });

/** An id with its type prefix (`key_`, `prd_`, `whk_`, `evt_`). */
export const prefixedId = (prefix: string, example: string) =>
  z
    .string()
    .regex(new RegExp(`^${prefix}_`))
    .meta({ example: `${prefix}_${example}` });

const MAX_GRACE_SECONDS = 7 * DAY_SECONDS;

/** How long an old key or signing secret keeps working after a rotation: 0 to 7 days, a day unless told. */
export const graceSeconds = (description: string) =>
  z
    .int({ error: "must be a whole number of seconds" })
    .min(0, { error: `must be 0 to ${MAX_GRACE_SECONDS} (7 days)` })
    .max(MAX_GRACE_SECONDS, { error: `must be 0 to ${MAX_GRACE_SECONDS} (7 days)` })
    .default(DAY_SECONDS)
    .meta({ description: `${description} (0 to 7 days; 1 day by default)`, example: 3600 });
