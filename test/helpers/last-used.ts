import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { type LastUsedLog, lastUsedLog } from "../../src/api-keys/object/last-used.ts";

/**
 * Waits until the key's `last_used` shard has stored the marks handed to it: the key's object hands its mark after its
 * answer, and the shard gathers marks for WRITE_EVERY_MS before it stores them, so a span that counts rows or lines
 * waits for that write rather than a guessed time.
 */
export async function lastUsedMarksStored(keyId: string): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 20)); // the mark's call, made after the answer, reaches the shard
  await runInDurableObject(lastUsedLog(env, keyId), async (shard: LastUsedLog) => {
    await (shard as unknown as { stored?: Promise<void> }).stored;
  });
}
