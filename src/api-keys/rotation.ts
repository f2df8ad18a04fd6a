import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import { newId } from "../platform/ids.ts";
import { generateApiKey, hashApiKey } from "./format.ts";
import type { CreatedApiKeyView } from "./schema.ts";
import { type ApiKeyRow, apiKeyView, findApiKey, KEYS_THAT_CAN_AUTHENTICATE, type KeyOfAccount, MAX_ACTIVE_KEYS } from "./service.ts";

/** Why a key cannot be rotated, or undefined when it can. */
function notRotatable(row: ApiKeyRow, now: string): string | undefined {
  const view = apiKeyView(row, now);
  if (view.status === "revoked") return `API key ${row.id} is revoked; create a new key instead.`;
  if (view.status === "expired") return `API key ${row.id} expired at ${row.expiresAt}; create a new key instead.`;
  if (row.rotatedTo) return `API key ${row.id} was already rotated to ${row.rotatedTo}; rotate that key instead.`;
  if (row.kind === "connector")
    return `API key ${row.id} is a connector key: its client's OAuth tokens rotate by themselves; revoke it to disconnect the client.`;
  return undefined;
}

/**
 * Creates the successor (same account and name, no expiry) and gives the old key `expires_at` = now + grace,
 * or its own earlier expiry if it has one (a rotation never lengthens a key's life). D1 takes both rows in one
 * batch (a transaction): the update that sets the old key's `rotated_to`, and the insert of the successor,
 * which happens only if that update took effect. So no successor exists without its predecessor pointing to it,
 * two concurrent rotations cannot both succeed, and the cap is checked in the same transaction: with a grace,
 * the old key keeps working beside its successor, so both count; `grace_seconds: 0` ends the old key at once
 * and is allowed at the cap. Only once D1 has committed is the old key's object told its new expiry, so a
 * batch that fails or loses a race never shortens a key that stays active. Should that push fail, a retried
 * rotation answers 409 ("already rotated") and pushes the stored expiry again.
 */
export async function rotateApiKey(
  { db, keyObjects, config }: Pick<RequestServices, "db" | "keyObjects" | "config">,
  { accountId, id, graceSeconds }: KeyOfAccount & { graceSeconds: number },
): Promise<CreatedApiKeyView> {
  const old = await findApiKey(db, { accountId, id });
  const now = new Date();
  const nowIso = now.toISOString();
  const refusal = notRotatable(old, nowIso);
  if (refusal) {
    if (old.rotatedTo && old.expiresAt) await keyObjects.expire(old.keyHash, Date.parse(old.expiresAt));
    throw new ApiError(409, refusal);
  }

  const graceEnd = new Date(now.getTime() + graceSeconds * 1000).toISOString();
  const oldExpiresAt = old.expiresAt !== null && old.expiresAt < graceEnd ? old.expiresAt : graceEnd;
  // The old key ends now (grace 0, or an expiry already due) or keeps working beside its successor: then both count.
  const keepsWorking = oldExpiresAt > nowIso;
  const { key, prefix } = generateApiKey(config.KEY_PREFIX, old.environment); // a test key's successor is a test key
  const successorId = newId("key");
  const d1 = db.$client;
  const [updated] = await d1.batch([
    d1
      .prepare(
        `UPDATE api_keys SET rotated_to = ?, expires_at = ? WHERE id = ? AND account_id = ? AND status = 'active'
         AND rotated_to IS NULL AND (expires_at IS NULL OR expires_at > ?) AND (? = 0 OR ${KEYS_THAT_CAN_AUTHENTICATE} < ?)`,
      )
      .bind(successorId, oldExpiresAt, id, accountId, nowIso, keepsWorking ? 1 : 0, accountId, nowIso, MAX_ACTIVE_KEYS),
    d1
      .prepare(
        `INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at, rotated_from, allowed_ips, scopes, environment)
         SELECT ?, ?, ?, ?, ?, 'active', ?, ?, allowed_ips, scopes, environment FROM api_keys WHERE id = ? AND rotated_to = ?`,
      )
      .bind(successorId, accountId, old.name, prefix, await hashApiKey(key), nowIso, id, id, successorId),
  ]);
  if (updated!.meta.changes !== 1) {
    const current = await findApiKey(db, { accountId, id });
    throw new ApiError(409, notRotatable(current, nowIso) ?? (keepsWorking ? atTheCap : `API key ${id} cannot be rotated now; try again.`));
  }
  await keyObjects.expire(old.keyHash, Date.parse(oldExpiresAt));
  const { allowed_ips, scopes } = apiKeyView(old); // the successor has the old key's restrictions
  return {
    id: successorId,
    name: old.name,
    prefix,
    environment: old.environment,
    key,
    status: "active",
    created_at: nowIso,
    expires_at: null,
    rotated_from: id,
    rotated_to: null,
    allowed_ips,
    scopes,
  };
}

const atTheCap =
  `This account already has ${MAX_ACTIVE_KEYS} keys that work, counting rotated keys still in their grace, and a rotation with a grace ` +
  "would add one: revoke a key first, or rotate with grace_seconds: 0, which replaces the key at once.";
