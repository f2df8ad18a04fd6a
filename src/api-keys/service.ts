import { and, desc, eq, sql } from "drizzle-orm";
import { generateApiKey, hashApiKey } from "../auth/api-key.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { apiKeys } from "../platform/tables.ts";
import type { RateLimitControl } from "../rate-limit/types.ts";
import type { ApiKeyView, CreatedApiKeyView } from "./schema.ts";

export const MAX_ACTIVE_KEYS = 100;

export type ApiKeyRow = typeof apiKeys.$inferSelect;

export function apiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    status: row.status,
    created_at: row.createdAt,
    last_used_at: row.lastUsedAt,
    revoked_at: row.revokedAt,
  };
}

const notFound = (id: string) => new ApiError(404, `No API key ${id} in this account.`);

export async function createApiKey(db: Database, accountId: string, name: string, servicePrefix: string): Promise<CreatedApiKeyView> {
  const { key, prefix } = generateApiKey(servicePrefix);
  const row = {
    id: `key_${crypto.randomUUID().replaceAll("-", "")}`,
    accountId,
    name,
    prefix,
    keyHash: await hashApiKey(key),
    createdAt: new Date().toISOString(),
  };
  // One statement, so two concurrent creates cannot both slip under the cap.
  const result = await db.run(sql`
    INSERT INTO ${apiKeys} (id, account_id, name, prefix, key_hash, status, created_at)
    SELECT ${row.id}, ${accountId}, ${name}, ${prefix}, ${row.keyHash}, 'active', ${row.createdAt}
    WHERE (SELECT count(*) FROM ${apiKeys} WHERE account_id = ${accountId} AND status = 'active') < ${MAX_ACTIVE_KEYS}`);
  if (result.meta.changes !== 1) {
    throw new ApiError(409, `This account already has ${MAX_ACTIVE_KEYS} active keys; revoke one before creating another.`);
  }
  return { id: row.id, name, prefix, key, status: "active" as const, created_at: row.createdAt };
}

export function listApiKeys(db: Database, accountId: string): Promise<ApiKeyRow[]> {
  return db.select().from(apiKeys).where(eq(apiKeys.accountId, accountId)).orderBy(desc(apiKeys.createdAt), desc(apiKeys.id)).all();
}

export async function renameApiKey(db: Database, accountId: string, id: string, name: string): Promise<ApiKeyRow> {
  const [row] = await db
    .update(apiKeys)
    .set({ name })
    .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId)))
    .returning();
  if (!row) throw notFound(id);
  return row;
}

/**
 * Irreversible; revoking a revoked key answers with the same record. The key's rate-limit object
 * hears of it first: should D1 then fail, the key is already refused and a retried DELETE completes it.
 */
export async function revokeApiKey(db: Database, limiter: RateLimitControl, accountId: string, id: string): Promise<ApiKeyRow> {
  const ownKey = and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId));
  const existing = await db.select().from(apiKeys).where(ownKey).get();
  if (!existing) throw notFound(id);
  await limiter.revoke(existing);
  if (existing.status === "revoked") return existing;
  const [revoked] = await db
    .update(apiKeys)
    .set({ status: "revoked", revokedAt: new Date().toISOString() })
    .where(and(ownKey, eq(apiKeys.status, "active")))
    .returning();
  return revoked ?? (await db.select().from(apiKeys).where(ownKey).get())!;
}

export async function activeKeyHashes(db: Database, accountId: string): Promise<string[]> {
  const rows = await db.select({ keyHash: apiKeys.keyHash }).from(apiKeys).where(and(eq(apiKeys.accountId, accountId), eq(apiKeys.status, "active")));
  return rows.map((r) => r.keyHash);
}
