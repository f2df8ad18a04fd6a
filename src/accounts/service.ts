import { activeKeyHashes } from "../api-keys/service.ts";
import type { Database } from "../platform/db.ts";
import { accounts, type PlanName } from "../platform/tables.ts";
import { PLAN_LIMITS } from "../rate-limit/plans.ts";
import type { RateLimitControl } from "../rate-limit/types.ts";
import type { AccountView } from "./schema.ts";

export type Account = typeof accounts.$inferSelect;

/** Changes the plan, then tells every active key's object before answering. */
export async function setPlan(db: Database, limiter: RateLimitControl, id: string, plan: PlanName): Promise<Account> {
  const [account] = await db.insert(accounts).values({ id, plan }).onConflictDoUpdate({ target: accounts.id, set: { plan } }).returning();
  await limiter.setLimits(await activeKeyHashes(db, id), PLAN_LIMITS[plan]);
  return account!;
}

export function accountView(account: Account): AccountView {
  return { id: account.id, plan: account.plan, limits: PLAN_LIMITS[account.plan], created_at: account.createdAt };
}
