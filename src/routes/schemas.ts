import { z } from "zod";
import { PLAN_NAMES } from "../db/schema.ts";
import { MAX_SUBJECT_LENGTH } from "../auth/idp.ts";

export const required = (type: string) => (issue: { input?: unknown }) => (issue.input === undefined ? "is required" : `must be a ${type}`);
/** An object schema's own message for a non-object; other issues (an unknown field) keep zod's, which names the field. */
export const jsonObject = { error: (issue: { code?: string }) => (issue.code === "invalid_type" ? "must be a JSON object" : undefined) };

/** 1–100 characters (code points, so an emoji counts once), no control characters, trimmed. */
export const keyName = z
  .string({ error: required("string") })
  .trim()
  .refine((s) => [...s].length >= 1 && [...s].length <= 100, { error: "must be 1 to 100 characters" })
  .refine((s) => !/\p{Cc}/u.test(s), { error: "must not contain control characters" })
  .meta({ description: "1 to 100 characters (trimmed; an emoji counts once), no control characters", example: "Production server" });

export const apiKeyBody = z.strictObject({ name: keyName }, jsonObject);

export const planBody = z.strictObject(
  { plan: z.enum(PLAN_NAMES, { error: `must be one of ${PLAN_NAMES.join(", ")}` }) },
  jsonObject,
);

export const accountIdParam = z.string().min(1).max(MAX_SUBJECT_LENGTH, { error: `must be at most ${MAX_SUBJECT_LENGTH} characters` });
