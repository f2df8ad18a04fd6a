import { eq } from "drizzle-orm";
import type { Database } from "../../platform/db.ts";
import { accounts, apiKeys } from "../../platform/tables.ts";
import { PLAN_LIMITS } from "../../rate-limit/plans.ts";
import { holdsScope } from "../scopes.ts";
import { isAllowed } from "./allowed-ips.ts";
import type { KeyRefusal, KeyRequest, KeyRestrictions, KeyState } from "./types.ts";

/**
 * The key's record as its object keeps it: read from D1 (beside the object rather than in the API-keys service: the
 * object depends on the tables, never on the service that pushes revocations to it), merged with what pushes stored,
 * and checked against a request.
 */

/**
 * The D1 read of a key's object, on its first wake and when a change is pushed as "read it again": what the key is,
 * its expiry and its plan's limits (a test key's: standard), or undefined for no such key.
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
      environment: apiKeys.environment,
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
        // A test key runs on the standard plan's limits whatever the account's plan (contract, "Test mode").
        limits: PLAN_LIMITS[found.environment === "test" ? "standard" : found.plan],
        expiresAt: found.expiresAt === null ? null : Date.parse(found.expiresAt),
        allowedIps: found.allowedIps,
        scopes: found.scopes,
      }
    : { status: "revoked", keyId: found.id, accountId: found.accountId };
}

/** Whether an active key has expired (a rotated key's grace ends at its `expiresAt` too). */
export const pastExpiry = (key: { expiresAt: number | null }, now: number) => key.expiresAt !== null && now >= key.expiresAt;

/**
 * What a read of D1 leaves, given what pushes stored while it ran: a read may have begun before a revocation or a
 * rotation's expiry reached D1, so a revocation stays, and of two expiries the earlier (an expiry only ever comes closer).
 */
export function withPushes(held: KeyState | undefined, read: KeyState): KeyState {
  if (held?.status === "revoked") return held;
  if (held === undefined || read.status === "revoked") return read;
  const expiresAt = held.expiresAt === null ? read.expiresAt : Math.min(held.expiresAt, read.expiresAt ?? held.expiresAt);
  return { ...read, expiresAt };
}

/** Why the key may not make this request (its route's environment, its address or its route's scope), or undefined when it may. */
export function outsideRestrictions(key: KeyRestrictions, request: KeyRequest): KeyRefusal | undefined {
  const environment = request.environment;
  if (environment && environment.needed !== environment.key) return { kind: "environment", ...environment };
  if (key.allowedIps && !isAllowed(request.ip, key.allowedIps)) return { kind: "ip", ip: request.ip };
  if (request.scope !== undefined && !holdsScope(key.scopes, request.scope)) return { kind: "scope", needed: request.scope };
  return undefined;
}
