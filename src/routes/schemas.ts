import { z } from "zod";
import { PLAN_NAMES } from "../db/schema.ts";
import { MAX_SUBJECT_LENGTH } from "../auth/idp.ts";

/** 1–100 characters (code points, so an emoji counts once), no control characters, trimmed. */
export const keyName = z
  .string({ error: "must be a string" })
  .trim()
  .refine((s) => [...s].length >= 1 && [...s].length <= 100, { error: "must be 1 to 100 characters" })
  .refine((s) => !/\p{Cc}/u.test(s), { error: "must not contain control characters" });

export const apiKeyBody = z.strictObject({ name: keyName }, { error: "must be a JSON object" });

export const planBody = z.strictObject(
  { plan: z.enum(PLAN_NAMES, { error: `must be one of ${PLAN_NAMES.join(", ")}` }) },
  { error: "must be a JSON object" },
);

export const accountIdParam = z.string().min(1).max(MAX_SUBJECT_LENGTH, { error: `must be at most ${MAX_SUBJECT_LENGTH} characters` });
