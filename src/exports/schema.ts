import { z } from "zod";
import { environmentField } from "../api-keys/schema.ts";
import { later } from "../http/document-rules.ts";
import { DATE_OR_DATE_TIME, isoTimestamp } from "../http/query.ts";
import { uriSchema } from "../http/uri.ts";
import { jsonObject, required } from "../http/validation.ts";
import { orNull, prefixedId, timestamp } from "../http/wire.ts";
import { EXPORT_FORMATS, EXPORT_KINDS, EXPORT_SCHEDULES, EXPORT_STATUSES } from "./tables.ts";

/** The exports' wire shapes, declared once (docs/exports.md). */

const instant = z.string({ error: required("string") }).pipe(isoTimestamp);
/** A credential or region as a signed request's headers carry it: 1 to `max` printable ASCII characters, no spaces. */
const token = (max: number) =>
  z
    .string({ error: required("string") })
    .regex(new RegExp(`^[\\x21-\\x7e]{1,${max}}$`), { error: `must be 1 to ${max} printable ASCII characters, no spaces` });

/**
 * The customer's S3-compatible bucket. The endpoint follows the webhooks' URL policy (https://, a public host); the
 * secret is stored encrypted and never shown again.
 */
const s3Destination = z
  .strictObject(
    {
      type: z.literal("s3", { error: 'must be "s3"' }),
      endpoint: uriSchema("The bucket's S3 endpoint, https:// URL of a public host (no localhost, private or link-local addresses)").meta({
        example: "https://s3.eu-west-1.amazonaws.com",
      }),
      bucket: z
        .string({ error: required("string") })
        .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, { error: "must be an S3 bucket name: 3-63 lower-case letters, digits, '.' or '-'" })
        .meta({ example: "acme-lake" }),
      prefix: z
        .string({ error: required("string") })
        .max(512, { error: "must be at most 512 characters" })
        .regex(/^(?:[A-Za-z0-9!_.*'()-]+\/)*$/, {
          error: "must be empty or path segments each ending in / (letters, digits and !_.*'()-)",
        })
        .default("")
        .meta({ description: "Where under the bucket the files go; empty or ending in /", example: "prices/" }),
      region: z
        .string({ error: required("string") })
        .regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'must be 1 to 64 letters, digits, "_" or "-", such as "eu-west-1" or "auto"' })
        .meta({ example: "eu-west-1" }),
      access_key_id: token(128),
      secret_access_key: token(256).meta({ description: "Stored encrypted; never shown again", writeOnly: true }),
    },
    jsonObject,
  )
  .meta({ id: "S3Destination" });

/** Hourly or daily: a named enum, so a generated client has one type for it, nullable where it is shown. */
const ExportSchedule = z.enum(EXPORT_SCHEDULES, { error: "must be hourly or daily" }).meta({
  id: "ExportSchedule",
  description: "How often a scheduled changes export appends: each closed hour's or day's changes",
});

/** What every export takes: its format, environment and destination. */
const common = {
  format: z.enum(EXPORT_FORMATS, { error: "must be parquet or ndjson" }).default("parquet"),
  environment: environmentField
    .default("live")
    .meta({ description: "test: this account's sandbox (its 1,000 synthetic products and its own changes, kept 7 days)" }),
  destination: s3Destination
    .optional()
    .meta({ description: "The customer's S3-compatible bucket; absent: the service's own, with signed download URLs" }),
};

const catalogueExport = z
  .strictObject(
    {
      kind: z.literal("catalogue").meta({
        description: "One row per offer of the published snapshot, with its product's fields, as GET /products serves them",
      }),
      ...common,
    },
    jsonObject,
  )
  .meta({ id: "CatalogueExportRequest" });

const changesExportFields = z.strictObject(
  {
    kind: z.literal("changes").meta({ description: "One row per price.changed and stock.changed event of [since, until)" }),
    ...common,
    since: instant.meta({
      ...DATE_OR_DATE_TIME,
      description: "Events at or after this instant: any span the service holds, the archived history past 30 days included",
      example: "2026-01-01",
    }),
    until: instant.optional().meta({
      ...DATE_OR_DATE_TIME,
      description: "Events before this instant, later than since; now by default. Not with schedule (a scheduled export has no end)",
      example: "2026-02-01",
    }),
    schedule: ExportSchedule.optional().meta({
      description: "Keep appending each closed hour's or day's changes, without gap or duplicate",
    }),
  },
  jsonObject,
);
const changesExport = later(changesExportFields, "until", "since")
  .refine((body) => body.schedule === undefined || body.until === undefined, {
    path: ["until"],
    error: "a scheduled export has no end: leave until out",
  })
  // The same rule in JSON Schema: not both.
  .meta({ id: "ChangesExportRequest", not: { required: ["schedule", "until"] } });

/** POST /exports: a catalogue export, or a changes export with its span (kind tells them apart). */
export const exportBody = z.discriminatedUnion("kind", [catalogueExport, changesExport], {
  error: (issue) => (issue.code === "invalid_union" ? "kind: must be catalogue or changes" : undefined),
});
export type ExportBody = z.output<typeof exportBody>;

export const exportIdParam = z.object({
  id: z.string().min(1).meta({ description: "The export's id (`exp_…`)", example: "exp_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }),
});

const ExportFile = z
  .object({
    path: z.string().meta({ description: "Under the export's prefix, Hive-partitioned", example: "date=2026-12-07/part-00000.parquet" }),
    rows: z.int(),
    bytes: z.int(),
    download_url: z
      .string()
      .nullable()
      .meta({ description: "Signed, valid 1 hour from this response; null when the files went to the customer's bucket" }),
  })
  .meta({ id: "ExportFile" });

/** The customer's bucket as an export shows it: never its secret. */
const ShownDestination = z
  .object({
    type: z.literal("s3"),
    endpoint: z.string(),
    bucket: z.string(),
    prefix: z.string(),
    region: z.string(),
    access_key_id: z.string(),
  })
  .meta({ id: "ExportDestination" });

export const Export = z
  .object({
    id: prefixedId("exp", "0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d"),
    kind: z.enum(EXPORT_KINDS),
    format: z.enum(EXPORT_FORMATS),
    environment: environmentField,
    since: timestamp.nullable(),
    until: timestamp.nullable().meta({ description: "The end of what is written so far (a scheduled export moves it on)" }),
    schedule: orNull(ExportSchedule),
    status: z.enum(EXPORT_STATUSES).meta({
      description:
        "running: steps under way; succeeded: every file is written; scheduled: written up to until, the next span waits for its hour or day to close; failed: see error",
    }),
    rows: z.int(),
    files: z.int(),
    bytes: z.int(),
    error: z.string().nullable(),
    destination: orNull(ShownDestination).meta({ description: "The customer's bucket (never its secret); null: the service's own" }),
    prefix: z.string().meta({ description: "Where the files are in the bucket: the manifest is <prefix>_manifest.json" }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: "Export" });
export type ExportView = z.infer<typeof Export>;

export const ExportDetail = Export.extend({
  manifest_url: z
    .string()
    .nullable()
    .meta({ description: "The signed URL of _manifest.json (1 hour); null for the customer's bucket or before the first file" }),
  file_list: z.array(ExportFile).meta({ description: "The files written so far, in order" }),
}).meta({ id: "ExportDetail" });
export type ExportDetailView = z.infer<typeof ExportDetail>;

export const ExportList = z
  .object({ exports: z.array(Export).meta({ description: "Newest first, at most 100" }) })
  .meta({ id: "ExportList" });

export const downloadQuery = z.object({
  path: z
    .string({ error: required("string") })
    .min(1, { error: "must not be empty" })
    .max(1024, { error: "must be at most 1024 characters" }),
  expires: z
    .string()
    .regex(/^\d+$/, { error: "must be a Unix time in seconds" })
    .meta({ description: "When the URL stops working (Unix seconds)" }),
  signature: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { error: "must be 64 hex digits" })
    .meta({ description: "HMAC-SHA256 over id, path and expires" }),
});
