import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { lastUsedLog } from "../../src/api-keys/object/last-used.ts";
import { settled } from "./settle.ts";

/**
 * The key's object hands its newest `last_used` mark to its shard after the answer (a waitUntil), and the shard stores
 * the marks it gathers a second later: wait until the shard holds the mark, or D1 does once the shard flushed, so a
 * span that counts rows or lines takes that write in however slow the machine is.
 */
export async function lastUsedMarkStored(key: string, keyId: string): Promise<void> {
  const keyObject = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));
  const marked = await runInDurableObject(keyObject, (object) => (object as unknown as { lastUseRecorded: number }).lastUseRecorded);
  if (marked === 0) return; // never marked
  const at = new Date(marked).toISOString();
  await settled(async () => {
    const held = await runInDurableObject(lastUsedLog(env, keyId), (_object, state) =>
      state.storage.sql
        .exec<{ at: string }>(
          "SELECT max(marks.value) AS at FROM mark_rows, json_each(mark_rows.marks) AS marks WHERE marks.key = ?",
          keyId,
        )
        .toArray(),
    );
    const stored = await env.DB.prepare("SELECT last_used_at FROM api_keys WHERE id = ?")
      .bind(keyId)
      .first<{ last_used_at: string | null }>();
    expect([held[0]?.at, stored?.last_used_at].some((value) => typeof value === "string" && value >= at)).toBe(true);
  });
}
