import { z } from "zod";
import { earlier, inFuture } from "../http/document-rules.ts";
import { DATE_OR_DATE_TIME, isoTimestamp, strictQuery, when } from "../http/query.ts";
import { jsonObject, required } from "../http/validation.ts";
import { graceSeconds, orNull, prefixedId, timestamp } from "../http/wire.ts";
import { ENVIRONMENTS, KEY_KINDS } from "../platform/tables.ts";
import { DAY_MS } from "../platform/time.ts";
import { GRANULARITIES } from "../rate-limit/types.ts";
import { allowedIpsInput, restrictionFields, scopesInput } from "./restriction-schema.ts";
import { KEY_SCOPES } from "./scopes.ts";

/** No control character (\p{Cc} is U+0000–U+001F and U+007F–U+009F) and a non-space one somewhere. */
const NO_CONTROL = "[^\\u0000-\\u001F\\u007F-\\u009F]";
const NAME_PATTERN = `^${NO_CONTROL}*[^\\s\\u0000-\\u001F\\u007F-\\u009F]${NO_CONTROL}*$`;

/** 1–100 characters (code points, so an emoji counts once), no control characters, trimmed. */
const keyName = z
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

/** PATCH: any of the name and the restrictions; at least one. */
export const apiKeyBody = z
  .strictObject({ name: keyName.optional(), allowed_ips: allowedIpsInput.optional(), scopes: scopesInput.optional() }, jsonObject)
  .refine((body) => Object.values(body).some((value) => value !== undefined), { error: "name at least one of name, allowed_ips, scopes" })
  .meta({ minProperties: 1 });
export type ApiKeyPatch = z.output<typeof apiKeyBody>;

const YEAR_MS = 365 * DAY_MS;

/** A future instant at most a year ahead, judged when the request is read (inFuture, on the body). */
const expiresAt = z
  .string({ error: required("string") })
  .pipe(isoTimestamp)
  .meta({
    ...DATE_OR_DATE_TIME,
    description: "When the key stops working (ISO-8601 date or date-time, in the future, at most 1 year ahead); none by default",
    example: "2027-01-31T12:00:00Z",
  });

/** Live data, or the account's sandbox: a key's, a webhook's (src/webhooks/schema.ts) and a usage query's. */
export const environmentField = z.enum(ENVIRONMENTS, { error: "must be live or test" }).meta({
  id: "Environment",
  description: "live: the catalogue and its events; test: this account's sandbox (1,000 synthetic products, POST /test/observations)",
});

export const createKeyBody = inFuture(
  z.strictObject(
    {
      name: keyName,
      environment: environmentField
        .default("live")
        .meta({ description: "test: a `pda_test_` key, which reads this account's sandbox only, at the standard plan's limits" }),
      expires_at: expiresAt.optional(),
      allowed_ips: allowedIpsInput.default(null),
      scopes: scopesInput.default([...KEY_SCOPES]),
    },
    jsonObject,
  ),
  "expires_at",
  YEAR_MS,
  "1 year",
);
export type CreateKeyBody = z.output<typeof createKeyBody>;

export const rotateKeyBody = z.strictObject({ grace_seconds: graceSeconds("How long the old key keeps working, in seconds") }, jsonObject);

export const keyIdParam = z.object({
  id: z.string().min(1).meta({ description: "The key's id (`key_…`)", example: "key_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }),
});

const keyFields = {
  id: prefixedId("key", "3f2a…"),
  name: z.string(),
  prefix: z.string().meta({ description: "The only part of the key ever listed", example: "pda_live_Ab12Cd34" }),
  environment: environmentField,
};

const lifecycleFields = {
  ...restrictionFields,
  expires_at: timestamp.nullable().meta({ description: "Refused from this instant on (set at creation, or by a rotation: now + grace)" }),
  rotated_from: prefixedId("key", "3f2a…").nullable().meta({ description: "The key this one replaced" }),
  rotated_to: prefixedId("key", "3f2a…").nullable().meta({ description: "The key that replaced this one" }),
};

const KEY_STATUSES = ["active", "expired", "revoked"] as const;

const KeyKind = z.enum(KEY_KINDS).meta({
  id: "KeyKind",
  description:
    "api_key: made by POST /api-keys; connector: made when the account holder let an AI client connect to /mcp by OAuth " +
    "(one-click connect), named after the client, with the scopes chosen at consent; its OAuth tokens act as this key, " +
    "and revoking it ends them on their next request",
});

const RevokedReason = z.enum(["deleted", "leaked"]).meta({
  id: "RevokedReason",
  description: "deleted: by DELETE /api-keys/{id}; leaked: a secret scanner found it in public (docs/key-format.md)",
});

export const ApiKey = z
  .object({
    ...keyFields,
    kind: KeyKind,
    status: z.enum(KEY_STATUSES).meta({ description: "`expired` once `expires_at` has passed" }),
    created_at: timestamp,
    last_used_at: timestamp.nullable().meta({ description: "The last admitted request, at most 15 minutes late" }),
    revoked_at: timestamp.nullable(),
    revoked_reason: orNull(RevokedReason).meta({ description: "null while the key is not revoked" }),
    leaked_at: timestamp.nullable().meta({ description: "When a secret scanner reported the key" }),
    leak_url: z.string().nullable().meta({ description: "Where the scanner found it, as reported" }),
    ...lifecycleFields,
  })
  .meta({ id: "ApiKey", description: "A key as listed: never the full key." });
export type ApiKeyView = z.infer<typeof ApiKey>;

export const CreatedApiKey = z
  .object({
    ...keyFields,
    key: z.string().meta({ description: "The full key: in this response only; store it now", example: "pda_live_…" }),
    status: z.literal("active"),
    created_at: timestamp,
    ...lifecycleFields,
  })
  .meta({ id: "CreatedApiKey" });
export type CreatedApiKeyView = z.infer<typeof CreatedApiKey>;

export const ApiKeyList = z
  .object({ api_keys: z.array(ApiKey).meta({ description: "Newest first, revoked keys included" }) })
  .meta({ id: "ApiKeyList" });
export type ApiKeyListView = z.infer<typeof ApiKeyList>;

const usageQueryFields = {
  granularity: z
    .enum(GRANULARITIES, { error: `must be one of ${GRANULARITIES.join(", ")}` })
    .default("minute")
    .meta({ description: "minute (the last 24 h), hour (the last 30 days) or day (the last year); minute by default" }),
  from: when("The first bucket: the one holding this instant (clipped to the granularity's window); before to", "2026-01-31T00:00:00Z"),
  to: when("Buckets starting before this instant (clipped to the granularity's window)", "2026-01-31T12:00:00Z"),
};
export const usageQuery = earlier(strictQuery(usageQueryFields), "from", "to");
export type UsageQuery = z.infer<typeof usageQuery>;

/** GET /account/usage: the same, and which environment's keys to sum (the dashboard's Test mode switch). */
export const accountUsageQuery = earlier(
  strictQuery({
    ...usageQueryFields,
    environment: environmentField
      .optional()
      .meta({ description: "Only the keys of this environment (live or test); every key when absent" }),
  }),
  "from",
  "to",
);
export type AccountUsageQuery = z.infer<typeof accountUsageQuery>;

const UsageBucket = z
  .object({
    start: timestamp,
    admitted: z.int(),
    refused: z.int().meta({
      description:
        "Refused: over a rate limit or budget (429), the key expired or revoked (401), or outside the key's restrictions: a scope it " +
        "lacks, an address outside its allowed_ips, or a route of the other environment (403)",
    }),
    uncertain: z
      .int()
      .optional()
      .meta({
        description:
          "Of admitted, how many may not have been made: a restart of the key's rate limiter counts the admissions it had " +
          "reserved as made, so no limit is exceeded and usage is never under-counted. Absent when none",
      }),
  })
  .meta({ id: "UsageBucket" });

const usageFields = {
  granularity: z.enum(GRANULARITIES),
  buckets: z.array(UsageBucket).meta({ description: "Oldest first, every bucket of the range, zeros included" }),
};

export const KeyUsage = z.object({ key_id: prefixedId("key", "3f2a…"), ...usageFields }).meta({ id: "KeyUsage" });
export type KeyUsageView = z.infer<typeof KeyUsage>;

export const AccountUsage = z
  .object({ account_id: z.string(), ...usageFields })
  .meta({ id: "AccountUsage", description: "The sum of the account's keys, revoked and expired ones included" });
export type AccountUsageView = z.infer<typeof AccountUsage>;
