import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { accounts, ENVIRONMENTS, nowText } from "../platform/tables.ts";

export const EXPORT_KINDS = ["catalogue", "changes"] as const;
export const EXPORT_FORMATS = ["parquet", "ndjson"] as const;
export const EXPORT_SCHEDULES = ["hourly", "daily"] as const;
export const EXPORT_STATUSES = ["running", "succeeded", "failed", "scheduled"] as const;

/**
 * An account's exports (src/exports/): what was asked, where the files go, and the progress its ExportRunner object
 * reports after each step. The destination's secret is stored encrypted, as webhook secrets are (src/webhooks/secrets.ts).
 */
export const exports = sqliteTable(
  "exports",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    environment: text("environment", { enum: ENVIRONMENTS }).notNull(),
    kind: text("kind", { enum: EXPORT_KINDS }).notNull(),
    format: text("format", { enum: EXPORT_FORMATS }).notNull(),
    since: text("since"),
    until: text("until"),
    schedule: text("schedule", { enum: EXPORT_SCHEDULES }),
    /** The customer's bucket without its secret (JSON); null: the service's own bucket (EXPORTS). */
    destination: text("destination", { mode: "json" }).$type<Record<string, string>>(),
    /** `v1.<iv>.<ciphertext>` of the destination's secret_access_key under WEBHOOK_SECRET_KEY, the export id as AAD. */
    secretCiphertext: text("secret_ciphertext"),
    status: text("status", { enum: EXPORT_STATUSES }).notNull(),
    rows: integer("rows").notNull().default(0),
    files: integer("files").notNull().default(0),
    bytes: integer("bytes").notNull().default(0),
    error: text("error"),
    createdAt: text("created_at").notNull().default(nowText),
    updatedAt: text("updated_at").notNull().default(nowText),
  },
  // The cron's scheduled exports due for their next span: two index ranges (hourly, daily) of the scheduled ones.
  (t) => [index("exports_account_created").on(t.accountId, t.createdAt), index("exports_due").on(t.status, t.schedule, t.until)],
);
