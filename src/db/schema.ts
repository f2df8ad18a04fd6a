import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** The plans of spec section 8; the numbers live in src/plans.ts. */
export const PLAN_NAMES = ["free", "standard", "premium"] as const;
export type PlanName = (typeof PLAN_NAMES)[number];

const now = sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`;

/** One row per IdP subject; the account id is the JWT's `sub`. */
export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  plan: text("plan", { enum: PLAN_NAMES }).notNull().default("free"),
  createdAt: text("created_at").notNull().default(now),
});

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id")
      .notNull()
      .references(() => accounts.id),
    name: text("name").notNull(),
    prefix: text("prefix").notNull(),
    /** SHA-256 (hex) of the full key; the key itself is never stored. */
    keyHash: text("key_hash").notNull().unique(),
    status: text("status", { enum: ["active", "revoked"] }).notNull().default("active"),
    createdAt: text("created_at").notNull().default(now),
    lastUsedAt: text("last_used_at"),
    revokedAt: text("revoked_at"),
  },
  (t) => [index("api_keys_account_created").on(t.accountId, t.createdAt)],
);
