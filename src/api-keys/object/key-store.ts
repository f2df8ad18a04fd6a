import { eq } from "drizzle-orm";
import type { Database } from "../../platform/db.ts";
import { accounts, apiKeys } from "../../platform/tables.ts";
import { PLAN_LIMITS } from "../../rate-limit/plans.ts";
import type { KeyState } from "./types.ts";

/**
 * The key object's own read of D1, beside the object rather than in the API-keys
 * service: the object depends on the tables, never on the service that pushes revocations to it.
 */

/**
 * The D1 read of a key's object, on its first wake and when a change is pushed as "read it again": what the key is,
 * its expiry and its plan's limits, or undefined for no such key.
 */
export async function loadKeyState(db: Database, keyHash: string): Promise<KeyState | undefined> {
  const found = await db
    .select({
      id: apiKeys.id,
      accountId: apiKeys.accountId,
      status: apiKeys.status,
      expiresAt: apiKeys.expiresAt,
      allowedIps: apiKeys.allowedIps,
      scopes: apiKeys.scopes,
      plan: accounts.plan,
    })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(eq(apiKeys.keyHash, keyHash))
    .get();
  if (!found) return undefined;
  return found.status === "active"
    ? {
        status: "active",
        keyId: found.id,
        accountId: found.accountId,
        limits: PLAN_LIMITS[found.plan],
        expiresAt: found.expiresAt === null ? null : Date.parse(found.expiresAt),
        allowedIps: found.allowedIps,
        scopes: found.scopes,
      }
    : { status: "revoked", keyId: found.id, accountId: found.accountId };
}
