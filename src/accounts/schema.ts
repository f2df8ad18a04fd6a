import { z } from "zod";
import { MAX_SUBJECT_LENGTH } from "../auth/idp.ts";
import { jsonObject } from "../http/validation.ts";
import { timestamp } from "../http/wire.ts";
import { PLAN_NAMES } from "../platform/tables.ts";

export const planBody = z.strictObject({ plan: z.enum(PLAN_NAMES, { error: `must be one of ${PLAN_NAMES.join(", ")}` }) }, jsonObject);

export const accountIdParam = z.object({
  id: z
    .string()
    .min(1)
    .max(MAX_SUBJECT_LENGTH, { error: `must be at most ${MAX_SUBJECT_LENGTH} characters` })
    .meta({ description: "The account id: its login's `sub`", example: "auth0|64f1c2" }),
});

const Limits = z
  .object({ per_minute: z.int(), per_hour: z.int(), per_day: z.int() })
  .meta({ id: "Limits", description: "The plan's limits for each of the account's keys" });

export const Account = z
  .object({
    id: z.string().meta({ description: "The account login's `sub`" }),
    plan: z.enum(PLAN_NAMES),
    limits: Limits,
    created_at: timestamp,
  })
  .meta({ id: "Account" });
export type AccountView = z.infer<typeof Account>;
