/**
 * GitHub signs a secret-scanning report with ECDSA P-256 / SHA-256 and sends the signature as base64 of
 * its DER form (`SEQUENCE { INTEGER r, INTEGER s }`); WebCrypto verifies the IEEE P1363 form, r‖s with
 * each half exactly 32 bytes. Only strict DER is taken: anything else is not a signature GitHub made.
 */

const HALF = 32;

/** One DER INTEGER at `at`: its value without sign padding, and where the next element starts; undefined when malformed. */
function readInteger(der: Uint8Array, at: number): { value: Uint8Array; next: number } | undefined {
  if (der[at] !== 0x02) return undefined;
  const length = der[at + 1];
  // P-256 integers fit in 33 bytes (a leading 0x00 when the top bit is set), so the length is one short-form byte.
  if (length === undefined || length < 1 || length > HALF + 1) return undefined;
  const start = at + 2;
  const next = start + length;
  if (next > der.length) return undefined;
  let value = der.subarray(start, next);
  if (value[0]! & 0x80) return undefined; // negative: never r or s
  if (value[0] === 0x00) {
    if (value.length === 1 || !(value[1]! & 0x80)) return undefined; // a zero, or padding DER forbids
    value = value.subarray(1);
  }
  if (value.length > HALF) return undefined;
  return { value, next };
}

/** DER → r‖s (64 bytes), or undefined when the bytes are not a strict DER ECDSA P-256 signature. */
export function derToP1363(der: Uint8Array): Uint8Array | undefined {
  if (der.length < 8 || der[0] !== 0x30 || der[1] !== der.length - 2) return undefined;
  const r = readInteger(der, 2);
  const s = r && readInteger(der, r.next);
  if (!r || !s || s.next !== der.length) return undefined;
  const raw = new Uint8Array(HALF * 2);
  raw.set(r.value, HALF - r.value.length);
  raw.set(s.value, HALF * 2 - s.value.length);
  return raw;
}

/** Standard base64 only; undefined for anything else (GitHub sends standard base64). */
export function decodeBase64(text: string): Uint8Array | undefined {
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text)) return undefined;
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** Whether `signature` (base64 DER) is `key`'s signature of exactly these bytes. */
export async function verifyReportSignature(key: CryptoKey, signature: string, body: ArrayBuffer): Promise<boolean> {
  const der = decodeBase64(signature.trim());
  const raw = der && derToP1363(der);
  if (!raw) return false;
  return crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, key, raw, body);
}
