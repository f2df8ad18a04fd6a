import { and, desc, eq } from "drizzle-orm";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { apiKeys, type Environment, type KeyKind } from "../platform/tables.ts";
import { generateApiKey, hashApiKey } from "./format.ts";
import type { ApiKeyListView, ApiKeyPatch, ApiKeyView, CreatedApiKeyView, CreateKeyBody } from "./schema.ts";
import { KEY_SCOPES } from "./scopes.ts";

export const MAX_ACTIVE_KEYS = 100;

export type ApiKeyRow = typeof apiKeys.$inferSelect;

/** `expired` is not stored: a key is expired from its `expires_at` on, as its object decides. */
export function apiKeyView(row: ApiKeyRow, now = new Date().toISOString()): ApiKeyView {
  const expired = row.expiresAt !== null && row.expiresAt <= now;
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    environment: row.environment,
    kind: row.kind,
    status: row.status === "revoked" ? "revoked" : expired ? "expired" : "active",
    created_at: row.createdAt,
    last_used_at: row.lastUsedAt,
    revoked_at: row.revokedAt,
    revoked_reason: row.status === "revoked" ? (row.revokedReason ?? "deleted") : null,
    leaked_at: row.leakedAt,
    leak_url: row.leakUrl,
    expires_at: row.expiresAt,
    rotated_from: row.rotatedFrom,
    rotated_to: row.rotatedTo,
    allowed_ips: row.allowedIps,
    scopes: row.scopes ?? [...KEY_SCOPES],
  };
}

/** A key that can authenticate (binds: now): active and not expired, rotated keys still in their grace included. */
const CAN_AUTHENTICATE = "status = 'active' AND (expires_at IS NULL OR expires_at > ?)";

/**
 * How many keys of an account can authenticate (binds: account id, now): the cap counts every one of them
 * (else a chain of rotations would give an account a working key per link). Raw SQL, so a statement inside a
 * D1 batch can use it too.
 */
export const KEYS_THAT_CAN_AUTHENTICATE = `(SELECT count(*) FROM api_keys WHERE account_id = ? AND ${CAN_AUTHENTICATE})`;

const notFound = (id: string) => new ApiError(404, `No API key ${id} in this account.`);

/** An account's key, by id; another account's key id is 404, as if it did not exist. */
export interface KeyOfAccount {
  accountId: string;
  id: string;
}

export async function createApiKey(
  { db, config }: Pick<RequestServices, "db" | "config">,
  { accountId, fields, kind = "api_key" }: { accountId: string; fields: CreateKeyBody; kind?: KeyKind },
): Promise<CreatedApiKeyView> {
  const { key, prefix } = generateApiKey(config.KEY_PREFIX, fields.environment);
  const id = newId("key");
  const createdAt = new Date().toISOString();
  const expiresAt = fields.expires_at ?? null;
  // One statement, so two concurrent creates cannot both slip under the cap.
  const result = await db.$client
    .prepare(
      `INSERT INTO api_keys (id, account_id, name, prefix, key_hash, status, created_at, expires_at, allowed_ips, scopes, environment, kind)
       SELECT ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ? WHERE ${KEYS_THAT_CAN_AUTHENTICATE} < ?`,
    )
    .bind(
      id,
      accountId,
      fields.name,
      prefix,
      await hashApiKey(key),
      createdAt,
      expiresAt,
      fields.allowed_ips === null ? null : JSON.stringify(fields.allowed_ips),
      JSON.stringify(fields.scopes),
      fields.environment,
      kind,
      accountId,
      createdAt,
      MAX_ACTIVE_KEYS,
    )
    .run();
  if (result.meta.changes !== 1) {
    throw new ApiError(
      409,
      `This account already has ${MAX_ACTIVE_KEYS} active keys (rotated keys still in their grace count too); revoke ` +
        `one before creating another.`,
    );
  }
  return {
    id,
    name: fields.name,
    prefix,
    environment: fields.environment,
    key,
    status: "active",
    created_at: createdAt,
    expires_at: expiresAt,
    rotated_from: null,
    rotated_to: null,
    allowed_ips: fields.allowed_ips,
    scopes: fields.scopes,
  };
}

export async function listApiKeys(db: Database, accountId: string): Promise<ApiKeyListView> {
  const rows = await db
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.accountId, accountId))
    .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
    .all();
  const now = new Date().toISOString();
  return { api_keys: rows.map((row) => apiKeyView(row, now)) };
}

export async function findApiKey(db: Database, { accountId, id }: KeyOfAccount): Promise<ApiKeyRow> {
  const row = await db
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId)))
    .get();
  if (!row) throw notFound(id);
  return row;
}

/**
 * Renames the key and changes its restrictions. D1 first, then the key's object reads them (restrictions only reach
 * requests through it): the next request is decided by the new ones, and concurrent PATCHes leave it with what D1
 * holds (the object reads D1 after each push, never a value a push carried). Pushed on every call that names a
 * restriction, so a call retried after a failed push completes it.
 */
export async function updateApiKey(
  { db, keyObjects }: Pick<RequestServices, "db" | "keyObjects">,
  { accountId, id, patch }: KeyOfAccount & { patch: ApiKeyPatch },
): Promise<ApiKeyView> {
  const changes = {
    ...(patch.name !== undefined && { name: patch.name }),
    ...(patch.allowed_ips !== undefined && { allowedIps: patch.allowed_ips }),
    ...(patch.scopes !== undefined && { scopes: patch.scopes }),
  };
  const [row] = await db
    .update(apiKeys)
    .set(changes)
    .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId)))
    .returning();
  if (!row) throw notFound(id);
  if ((patch.allowed_ips !== undefined || patch.scopes !== undefined) && row.status === "active") {
    await keyObjects.refresh(row.keyHash);
  }
  return apiKeyView(row);
}

/**
 * Irreversible; revoking a revoked key answers with the same record. The key's rate-limit object
 * hears of it first: should D1 then fail, the key is already refused and a retried DELETE completes it.
 */
export async function revokeApiKey(
  { db, keyObjects }: Pick<RequestServices, "db" | "keyObjects">,
  { accountId, id }: KeyOfAccount,
): Promise<ApiKeyView> {
  const ownKey = and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId));
  const existing = await db.select().from(apiKeys).where(ownKey).get();
  if (!existing) throw notFound(id);
  await keyObjects.revoke(existing);
  if (existing.status === "revoked") return apiKeyView(existing);
  const [revoked] = await db
    .update(apiKeys)
    .set({ status: "revoked", revokedAt: new Date().toISOString(), revokedReason: "deleted" })
    .where(and(ownKey, eq(apiKeys.status, "active")))
    .returning();
  return apiKeyView(revoked ?? (await db.select().from(apiKeys).where(ownKey).get())!);
}

/**
 * The hashes of the account's keys of an environment that can authenticate: at most MAX_ACTIVE_KEYS (the cap), however
 * many expired or rotated-out keys the account keeps.
 */
export async function authenticatingKeyHashes(db: Database, accountId: string, environment: Environment): Promise<string[]> {
  const { results } = await db.$client
    .prepare(`SELECT key_hash FROM api_keys WHERE account_id = ? AND environment = ? AND ${CAN_AUTHENTICATE} LIMIT ?`)
    .bind(accountId, environment, new Date().toISOString(), MAX_ACTIVE_KEYS)
    .all<{ key_hash: string }>();
  return results.map((row) => row.key_hash);
}
