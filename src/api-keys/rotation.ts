import { generateApiKey, hashApiKey } from "../auth/api-key.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import type { apiKeys } from "../platform/tables.ts";
import type { RateLimitControl } from "../rate-limit/types.ts";
import type { CreatedApiKeyView } from "./schema.ts";
import { apiKeyView, findApiKey, newKeyId } from "./service.ts";

/** Why a key cannot be rotated, or undefined when it can. */
function notRotatable(row: typeof apiKeys.$inferSelect, now: string): string | undefined {
  const view = apiKeyView(row, now);
  if (view.status === "revoked") return `API key ${row.id} is revoked; create a new key instead.`;
  if (view.status === "expired") return `API key ${row.id} expired at ${row.expiresAt}; create a new key instead.`;
  if (row.rotatedTo) return `API key ${row.id} was already rotated to ${row.rotatedTo}; rotate that key instead.`;
  return undefined;
}

/**
 * Creates the successor (same account and name, no expiry) and gives the old key `expires_at` = now + grace,
 * or its own earlier expiry if it has one (a rotation never lengthens a key's life). The old key's object
 * hears of the expiry first, as with a revocation: should D1 then fail, nothing was created, the old key
 * merely ends on time, and a retried rotation completes. D1 then takes both rows in one batch (a transaction):
 * the successor is inserted only if the update that names it as `rotated_to` took effect, so no successor
 * exists without its predecessor pointing to it, and two concurrent rotations cannot both succeed.
 * The successor takes the old key's place under the 100-key cap (the old key stops counting), so an account
 * at the cap can rotate.
 */
export async function rotateApiKey(
  db: Database,
  limiter: RateLimitControl,
  accountId: string,
  id: string,
  graceSeconds: number,
  servicePrefix: string,
): Promise<CreatedApiKeyView> {
  const old = await findApiKey(db, accountId, id);
  const now = new Date();
  const nowIso = now.toISOString();
  const refusal = notRotatable(old, nowIso);
  if (refusal) throw new ApiError(409, refusal);

  const graceEnd = new Date(now.getTime() + graceSeconds * 1000).toISOString();
  const oldExpiresAt = old.expiresAt !== null && old.expiresAt < graceEnd ? old.expiresAt : graceEnd;
  await limiter.expire(old.keyHash, Date.parse(oldExpiresAt));

  const { key, prefix } = generateApiKey(servicePrefix);
  const successorId = newKeyId();
  const d1 = db.$client;
  const [updated] = await d1.batch([
    d1
      .prepare(
        `UPDATE api_keys SET rotated_to = ?, expires_at = ? WHERE id = ? AND account_id = ? AND status = 'active'
         AND rotated_to IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
      )
      .bind(successorId, oldExpiresAt, id, accountId, nowIso),
    d1
      .prepare(
        `INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at, rotated_from)
         SELECT ?, ?, ?, ?, ?, 'active', ?, ? WHERE EXISTS (SELECT 1 FROM api_keys WHERE id = ? AND rotated_to = ?)`,
      )
      .bind(successorId, accountId, old.name, prefix, await hashApiKey(key), nowIso, id, id, successorId),
  ]);
  if (updated!.meta.changes !== 1) throw new ApiError(409, notRotatable(await findApiKey(db, accountId, id), nowIso) ?? `API key ${id} cannot be rotated now; try again.`);
  return { id: successorId, name: old.name, prefix, key, status: "active", created_at: nowIso, expires_at: null, rotated_from: id, rotated_to: null };
}
