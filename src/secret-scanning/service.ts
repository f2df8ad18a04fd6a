import pLimit from "p-limit";
import { accountEventMessage, accountEventRow } from "../account-events/rows.ts";
import { hashApiKey, isWellFormedApiKey } from "../api-keys/format.ts";
import type { EventMessage } from "../events/messages.ts";
import { relayEvents } from "../events/outbox.ts";
import type { RequestServices } from "../http/app-env.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import type { Database } from "../platform/db.ts";
import type { ReportedToken, TokenFeedback } from "./schema.ts";

/**
 * A verified secret-scanning report: every token that is or was one of our keys is a true positive,
 * and every live one is revoked before the answer. The cost does not grow with the report beyond
 * hashing it: key hashes are looked up LOOKUP_CHUNK to a statement (one bound JSON array each, all in
 * one batch), the revocations are pushed to the keys' objects MAX_OPEN_CONNECTIONS at a time,
 * and D1 records them, with their `api_key.leaked` events, in one more batch.
 */

/** Hashes per lookup statement: one bound parameter (a JSON array of about 67 KB), far from D1's 100-parameter and 2 MB limits. */
const LOOKUP_CHUNK = 1_000;
/** Keys revoked per pair of write statements. */
const REVOKE_CHUNK = 500;

interface KeyMatch {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  status: "active" | "revoked";
}

const chunks = <T>(items: readonly T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

/** Our keys among the hashes, whatever their status. */
async function findKeys(db: Database, hashes: readonly string[]): Promise<Map<string, KeyMatch>> {
  if (hashes.length === 0) return new Map();
  const d1 = db.$client;
  const lookup = d1.prepare(
    "SELECT id, account_id, name, prefix, key_hash, status FROM api_keys WHERE key_hash IN (SELECT value FROM json_each(?))",
  );
  const results = await d1.batch<KeyMatch>(chunks(hashes, LOOKUP_CHUNK).map((chunk) => lookup.bind(JSON.stringify(chunk))));
  return new Map(results.flatMap((result) => result.results).map((row) => [row.key_hash, row]));
}

/**
 * Revokes the live keys in D1 and writes their events, in one transaction. Each event is inserted only
 * for a key still active when the batch runs, and before that key's update: two reports of the same
 * key racing revoke it and announce it once. Returns the events written.
 */
async function recordLeaks(
  db: Database,
  leaks: readonly { key: KeyMatch; reported: ReportedToken }[],
  now: string,
): Promise<EventMessage[]> {
  const d1 = db.$client;
  const insertEvents = d1.prepare(
    `INSERT INTO events (id, type, timestamp, payload, created_at, account_id)
     SELECT json_extract(e.value, '$.id'), 'api_key.leaked', ?1, json_extract(e.value, '$.payload'), ?1, k.account_id
     FROM json_each(?2) e JOIN api_keys k ON k.id = json_extract(e.value, '$.key_id') AND k.status = 'active'
     RETURNING id`,
  );
  const revoke = d1.prepare(
    `UPDATE api_keys SET status = 'revoked', revoked_at = ?1, revoked_reason = 'leaked', leaked_at = ?1,
       leak_url = (SELECT json_extract(e.value, '$.url') FROM json_each(?2) e WHERE json_extract(e.value, '$.key_id') = api_keys.id)
     WHERE status = 'active' AND id IN (SELECT json_extract(e.value, '$.key_id') FROM json_each(?2) e)`,
  );
  const messages = new Map<string, EventMessage>();
  const statements = chunks(leaks, REVOKE_CHUNK).flatMap((chunk) => {
    const entries = chunk.map(({ key, reported }) => {
      const message = accountEventMessage({
        type: "api_key.leaked",
        data: {
          account_id: key.account_id,
          key_id: key.id,
          prefix: key.prefix,
          name: key.name,
          url: reported.url ?? null,
          source: reported.source ?? null,
          revoked_at: now,
        },
        timestamp: now,
      });
      messages.set(message.event.id, message);
      return { id: message.event.id, key_id: key.id, url: reported.url ?? null, payload: accountEventRow(message, now).payload };
    });
    const json = JSON.stringify(entries);
    return [insertEvents.bind(now, json), revoke.bind(now, json)];
  });
  if (statements.length === 0) return [];
  const results = await d1.batch<{ id: string }>(statements);
  return results.flatMap((result) => result.results.map((row) => messages.get(row.id)!)).filter(Boolean);
}

export async function reportLeakedTokens(
  { db, keyObjects, queue, config }: Pick<RequestServices, "db" | "keyObjects" | "queue" | "config">,
  report: readonly ReportedToken[],
): Promise<TokenFeedback[]> {
  const hashes = await Promise.all(report.map((reported) => hashApiKey(reported.token)));
  // A string that fails the format or the checksum was never one of our keys: no lookup for it.
  const candidates = [...new Set(hashes.filter((_, i) => isWellFormedApiKey(report[i]!.token, config.KEY_PREFIX)))];
  const keys = await findKeys(db, candidates);

  const leaks = new Map<string, { key: KeyMatch; reported: ReportedToken }>(); // the first occurrence of each live key
  hashes.forEach((hash, i) => {
    const key = keys.get(hash);
    if (key?.status === "active" && !leaks.has(key.id)) leaks.set(key.id, { key, reported: report[i]! });
  });
  // The objects first, as DELETE /api-keys does: should D1 then fail, the keys are refused already and GitHub's retry completes the record.
  const limit = pLimit(MAX_OPEN_CONNECTIONS);
  await Promise.all(
    [...leaks.values()].map(({ key }) => limit(() => keyObjects.revoke({ keyHash: key.key_hash, id: key.id, accountId: key.account_id }))),
  );
  const events = await recordLeaks(db, [...leaks.values()], new Date().toISOString());
  await relayEvents(db, queue, events);

  return report.map((reported, i) => ({
    token_hash: hashes[i]!,
    token_type: reported.type,
    label: keys.has(hashes[i]!) ? "true_positive" : "false_positive",
  }));
}
