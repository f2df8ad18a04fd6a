import { crc32 } from "node:zlib";
import { sha256Hex } from "../platform/hash.ts";
import type { Environment } from "../platform/tables.ts";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const RANDOM_LENGTH = 40; // 40 base62 characters ≈ 238 bits
const CHECKSUM_LENGTH = 6; // 62^6 > 2^32, so any CRC32 fits
const MAX_IDENTIFIER_LENGTH = 128;
const LISTED_IDENTIFIER_CHARS = 8;

function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      // 248 = 4 × 62: rejecting the rest keeps every character equally likely.
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

function checksum(body: string): string {
  let n = crc32(body);
  let out = "";
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

/** `<service>_live_` or `<service>_test_`: both environments' heads are the same length (docs/key-format.md). */
const head = (servicePrefix: string, environment: Environment) => `${servicePrefix}_${environment}_`;

export function generateApiKey(servicePrefix: string, environment: Environment = "live"): { key: string; prefix: string } {
  const body = head(servicePrefix, environment) + randomBase62(RANDOM_LENGTH);
  const key = body + checksum(body);
  return { key, prefix: key.slice(0, head(servicePrefix, environment).length + LISTED_IDENTIFIER_CHARS) };
}

/** The environment a key names (its head); undefined for a string that is not one of our keys' heads. */
export function keyEnvironment(token: string, servicePrefix: string): Environment | undefined {
  if (token.startsWith(head(servicePrefix, "live"))) return "live";
  if (token.startsWith(head(servicePrefix, "test"))) return "test";
  return undefined;
}

/** What a key looks like, for a caller whose bearer is not one (docs/key-format.md). */
export const keyShape = (servicePrefix: string) =>
  `${head(servicePrefix, "live")}… or ${head(servicePrefix, "test")}… followed by ${RANDOM_LENGTH + CHECKSUM_LENGTH} letters and digits`;

/** A key with something pasted around it (its quotes, a comma, a bracket): the key alone, or undefined when there is none. */
export function keyInside(token: string, servicePrefix: string): string | undefined {
  const inside = token.replace(/^[^0-9A-Za-z]+|[^0-9A-Za-z]+$/g, "");
  return inside !== token && looksLikeApiKey(inside, servicePrefix) ? inside : undefined;
}

/** True when the string is shaped like one of our keys, whether or not it is well formed. */
export function looksLikeApiKey(token: string, servicePrefix: string): boolean {
  return token.startsWith(`${servicePrefix}_`);
}

/**
 * Format and checksum, checked with no I/O: a typo or a made-up key never reaches storage.
 * Anything over the maximum length is refused before it is scanned.
 */
export function isWellFormedApiKey(token: string, servicePrefix: string): boolean {
  const environment = keyEnvironment(token, servicePrefix);
  if (environment === undefined) return false;
  const start = head(servicePrefix, environment);
  const identifierLength = token.length - start.length;
  if (identifierLength < 32 + CHECKSUM_LENGTH || identifierLength > MAX_IDENTIFIER_LENGTH) return false;
  if (!/^[0-9A-Za-z]+$/.test(token.slice(start.length))) return false;
  const body = token.slice(0, -CHECKSUM_LENGTH);
  return checksum(body) === token.slice(-CHECKSUM_LENGTH);
}

export const hashApiKey = (key: string): Promise<string> => sha256Hex(key);
