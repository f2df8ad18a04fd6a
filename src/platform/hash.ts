const encoder = new TextEncoder();

/** Hex of a SHA-256 digest, cut to its first `bytes` bytes where a shorter tag is enough (ETags). */
export async function sha256Hex(data: string | Uint8Array<ArrayBuffer>, bytes = 32): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", typeof data === "string" ? encoder.encode(data) : data);
  return Array.from(new Uint8Array(digest, 0, bytes), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** A stable 32-bit hash (FNV-1a) of a text: the same id always lands in the same place (a stream hub, a delivery queue). */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}
