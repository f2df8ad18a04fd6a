import { z } from "zod";
import { jsonObject, required } from "../http/validation.ts";
import { prefixedId, timestamp } from "../http/wire.ts";

/** No control character (\p{Cc} is U+0000–U+001F and U+007F–U+009F) and a non-space one somewhere. */
const NO_CONTROL = "[^\\u0000-\\u001F\\u007F-\\u009F]";
const NAME_PATTERN = `^${NO_CONTROL}*[^\\s\\u0000-\\u001F\\u007F-\\u009F]${NO_CONTROL}*$`;

/** 1–100 characters (code points, so an emoji counts once), no control characters, trimmed. */
export const keyName = z
  .string({ error: required("string") })
  .trim()
  .refine((s) => [...s].length >= 1 && [...s].length <= 100, { error: "must be 1 to 100 characters" })
  .refine((s) => !/\p{Cc}/u.test(s), { error: "must not contain control characters" })
  .meta({
    minLength: 1,
    maxLength: 100,
    pattern: NAME_PATTERN,
    description: "1 to 100 characters after trimming surrounding spaces (an emoji counts once), not blank, no control characters",
    example: "Production server",
  });

export const apiKeyBody = z.strictObject({ name: keyName }, jsonObject);

export const keyIdParam = z.object({ id: z.string().min(1).meta({ description: "The key's id (`key_…`)", example: "key_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }) });

const keyFields = {
  id: prefixedId("key", "3f2a…"),
  name: z.string(),
  prefix: z.string().meta({ description: "The only part of the key ever listed", example: "pda_live_Ab12Cd34" }),
};

export const ApiKey = z
  .object({
    ...keyFields,
    status: z.enum(["active", "revoked"]),
    created_at: timestamp,
    last_used_at: timestamp.nullable().meta({ description: "Updated at most once a minute" }),
    revoked_at: timestamp.nullable(),
  })
  .meta({ id: "ApiKey", description: "A key as listed: never the full key." });
export type ApiKeyView = z.infer<typeof ApiKey>;

export const CreatedApiKey = z
  .object({
    ...keyFields,
    key: z.string().meta({ description: "The full key: in this response only; store it now", example: "pda_live_…" }),
    status: z.literal("active"),
    created_at: timestamp,
  })
  .meta({ id: "CreatedApiKey" });
export type CreatedApiKeyView = z.infer<typeof CreatedApiKey>;

export const ApiKeyList = z.object({ api_keys: z.array(ApiKey).meta({ description: "Newest first, revoked keys included" }) }).meta({ id: "ApiKeyList" });
