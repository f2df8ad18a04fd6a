import { eq } from "drizzle-orm";
import type { Database } from "../db/client.ts";
import { accounts, type PlanName } from "../db/schema.ts";
import { PLAN_LIMITS } from "../plans.ts";

export type Account = typeof accounts.$inferSelect;

/** The account for an IdP subject, created on the Free plan the first time the subject is seen. */
export async function ensureAccount(db: Database, id: string): Promise<Account> {
  const existing = await db.select().from(accounts).where(eq(accounts.id, id)).get();
  if (existing) return existing;
  await db.insert(accounts).values({ id }).onConflictDoNothing();
  return (await db.select().from(accounts).where(eq(accounts.id, id)).get())!;
}

export async function setPlan(db: Database, id: string, plan: PlanName): Promise<Account> {
  const [account] = await db
    .insert(accounts)
    .values({ id, plan })
    .onConflictDoUpdate({ target: accounts.id, set: { plan } })
    .returning();
  return account!;
}

export function accountView(account: Account) {
  return { id: account.id, plan: account.plan, limits: PLAN_LIMITS[account.plan], created_at: account.createdAt };
}
