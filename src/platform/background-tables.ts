import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * The D1 tables of background work (drizzle, the source of the migrations beside src/platform/tables.ts): the cron's
 * leases and the pushes to keys' objects and stream hubs the cron retries. Their statements are written as SQL where
 * they run; these declarations keep the schema whole for drizzle-kit.
 */

/**
 * The leases of the cron tasks that must not overlap with themselves, one row per task while a run holds it
 * (src/platform/cron-lease.ts). `expires_at` is epoch ms.
 */
export const cronLeases = sqliteTable("cron_leases", {
  task: text("task").primaryKey(),
  holder: text("holder").notNull(),
  expiresAt: integer("expires_at").notNull(),
});

/**
 * Keys a plan change could not push its limits to, until the cron has made their objects read the key again
 * (src/accounts/plan-pushes.ts).
 */
export const unreachedPlanPushes = sqliteTable("unreached_plan_pushes", {
  keyHash: text("key_hash").primaryKey(),
  notedAt: integer("noted_at").notNull(),
});

/**
 * Key changes the key's object could not push to its account's stream hub, until the cron has pushed them
 * (src/stream/stub.ts): one per key, the latest state and the earliest expiry noted.
 */
export const unreachedStreamPushes = sqliteTable("unreached_stream_pushes", {
  keyId: text("key_id").primaryKey(),
  accountId: text("account_id").notNull(),
  active: integer("active", { mode: "boolean" }).notNull(),
  expiresAt: integer("expires_at"),
  notedAt: integer("noted_at").notNull(),
});
