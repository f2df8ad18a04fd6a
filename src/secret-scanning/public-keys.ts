import { z } from "zod";
import { isolateMap } from "../platform/isolate-memory.ts";
import { logger } from "../platform/log.ts";
import { HOUR_MS, MINUTE_MS } from "../platform/time.ts";

/**
 * GitHub's secret-scanning public keys (`SECRET_SCANNING_KEYS_URL`), cached per isolate. A signature names
 * its key by identifier; an identifier the cache does not hold makes the list be fetched again, at most
 * once a minute (so unsigned noise cannot make us hammer GitHub), and the list is refreshed hourly anyway,
 * so a key GitHub withdraws stops being trusted. When a refresh fails, the keys already held keep working.
 */

const REFETCH_UNKNOWN_AFTER_MS = MINUTE_MS;
const REFRESH_AFTER_MS = HOUR_MS;
/** Well inside the time GitHub gives a partner endpoint to answer. */
const FETCH_TIMEOUT_MS = 10_000;

const keyList = z.object({
  public_keys: z.array(z.object({ key_identifier: z.string().min(1), key: z.string().min(1), is_current: z.boolean().optional() })),
});

interface CachedKeys {
  keys: Map<string, CryptoKey>;
  fetchedAt: number;
}

const caches = isolateMap<string, CachedKeys>();
/** The last fetch started per URL, failed or not: the once-a-minute rule holds while GitHub is down too. */
const attempts = isolateMap<string, number>();
const inFlight = isolateMap<string, Promise<CachedKeys>>();

/** The SubjectPublicKeyInfo bytes of a PEM public key. */
function pemBody(pem: string): Uint8Array {
  const base64 = pem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, "").replace(/\s+/g, "");
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

async function importKey(pem: string): Promise<CryptoKey | undefined> {
  try {
    return await crypto.subtle.importKey("spki", pemBody(pem), { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
  } catch {
    return undefined; // not a P-256 key: no signature can name it
  }
}

async function fetchKeys(url: string, now: number): Promise<CachedKeys> {
  const res = await fetch(url, {
    headers: { Accept: "application/json", "User-Agent": "price-data-api-secret-scanning" },
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
  });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  const list = keyList.parse(await res.json());
  const keys = new Map<string, CryptoKey>();
  for (const entry of list.public_keys) {
    const key = await importKey(entry.key);
    if (key) keys.set(entry.key_identifier, key);
  }
  return { keys, fetchedAt: now };
}

/** One fetch at a time per URL: concurrent reports naming a new key share it. */
function refresh(url: string, now: number): Promise<CachedKeys> {
  let pending = inFlight.get(url);
  if (!pending) {
    pending = fetchKeys(url, now)
      .then((fresh) => {
        caches.set(url, fresh);
        return fresh;
      })
      .finally(() => inFlight.delete(url));
    inFlight.set(url, pending);
  }
  return pending;
}

export class KeyListUnavailable extends Error {}

/**
 * The key `identifier` names, or undefined when GitHub's list does not hold it (after one refetch, if the
 * last fetch is at least a minute old). Throws KeyListUnavailable when no list could be fetched at all.
 */
export async function publicKey(url: string, identifier: string, now = Date.now()): Promise<CryptoKey | undefined> {
  const cached = caches.get(url);
  const held = cached?.keys.get(identifier);
  const stale = !cached || now - cached.fetchedAt >= REFRESH_AFTER_MS;
  const mayFetch = now - (attempts.get(url) ?? -Infinity) >= REFETCH_UNKNOWN_AFTER_MS || inFlight.has(url);
  if ((held && !stale) || !mayFetch) {
    if (!cached) throw new KeyListUnavailable();
    return held;
  }
  if (!inFlight.has(url)) attempts.set(url, now);
  try {
    return (await refresh(url, now)).keys.get(identifier);
  } catch (error) {
    logger("secret-scanning").error("public keys not fetched", { error: String(error) });
    if (!cached) throw new KeyListUnavailable();
    return held;
  }
}
