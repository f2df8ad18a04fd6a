import { Buffer } from "node:buffer";
import { isolateMap } from "../platform/isolate-memory.ts";

/**
 * Webhook signing secrets: `whsec_` + base64 of 32 random bytes (the Standard Webhooks format), shown
 * once and stored only encrypted with AES-256-GCM under WEBHOOK_SECRET_KEY, a Worker secret. The
 * webhook's id is the additional authenticated data, so a ciphertext copied onto another row does not
 * decrypt: a copy of the D1 database alone can neither sign nor move secrets between webhooks.
 */

const SECRET_PREFIX = "whsec_";
const SECRET_BYTES = 32;
const IV_BYTES = 12;
const FORMAT = "v1";

const encoder = new TextEncoder();
const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
const fromBase64 = (text: string) => new Uint8Array(Buffer.from(text, "base64"));

export function generateWebhookSecret(): string {
  return SECRET_PREFIX + base64(crypto.getRandomValues(new Uint8Array(SECRET_BYTES)));
}

/** The bytes an HMAC is keyed with: the base64 after `whsec_`, decoded (Standard Webhooks). */
export function secretKeyBytes(secret: string): Uint8Array {
  return fromBase64(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret);
}

const aesKeys = isolateMap<string, Promise<CryptoKey>>();

/** The imported key, once per isolate (WEBHOOK_SECRET_KEY is validated by src/platform/config.ts). */
function aesKey(keyBase64: string): Promise<CryptoKey> {
  let key = aesKeys.get(keyBase64);
  if (!key) {
    key = crypto.subtle.importKey("raw", fromBase64(keyBase64), "AES-GCM", false, ["encrypt", "decrypt"]);
    aesKeys.set(keyBase64, key);
  }
  return key;
}

export async function encryptSecret(keyBase64: string, { webhookId, secret }: { webhookId: string; secret: string }): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
  const ciphertext = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: encoder.encode(webhookId) },
    await aesKey(keyBase64),
    encoder.encode(secret),
  );
  return `${FORMAT}.${base64(iv)}.${base64(new Uint8Array(ciphertext))}`;
}

/** Throws when the text was not made by encryptSecret for this webhook under this key. */
export async function decryptSecret(keyBase64: string, { webhookId, stored }: { webhookId: string; stored: string }): Promise<string> {
  const [format, iv, ciphertext] = stored.split(".");
  if (format !== FORMAT || iv === undefined || ciphertext === undefined) throw new Error("Unknown webhook secret format.");
  const plaintext = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: fromBase64(iv), additionalData: encoder.encode(webhookId) },
    await aesKey(keyBase64),
    fromBase64(ciphertext),
  );
  return new TextDecoder().decode(plaintext);
}
