import { authenticatingKeyHashes } from "../api-keys/service.ts";
import type { RequestServices } from "../http/app-env.ts";
import { type AccountRow, accounts, type PlanName } from "../platform/tables.ts";
import { PLAN_LIMITS } from "../rate-limit/plans.ts";
import { noteUnreachedKeys } from "./plan-pushes.ts";
import type { AccountView } from "./schema.ts";

/**
 * Changes the plan (creating the account if it is new), then tells the object of every key that can authenticate
 * before answering; keys that cannot are never called (an account may have any number of expired ones). An object
 * that cannot be reached is noted for the cron to retry (src/accounts/plan-pushes.ts): D1 has the plan, so the answer
 * is still 200.
 */
export async function setAccountPlan(
  { db, keyObjects }: Pick<RequestServices, "db" | "keyObjects">,
  { accountId, plan }: { accountId: string; plan: PlanName },
): Promise<AccountView> {
  const [account] = await db
    .insert(accounts)
    .values({ id: accountId, plan })
    .onConflictDoUpdate({ target: accounts.id, set: { plan } })
    .returning();
  const unreached = await keyObjects.setLimits(await authenticatingKeyHashes(db, accountId, "live"), PLAN_LIMITS[plan]);
  if (unreached.length > 0) await noteUnreachedKeys(db, unreached);
  return accountView(account!);
}

export function accountView(account: AccountRow): AccountView {
  return { id: account.id, plan: account.plan, limits: PLAN_LIMITS[account.plan], created_at: account.createdAt };
}
