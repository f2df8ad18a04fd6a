const encoder = new TextEncoder();

/** Hex of a SHA-256 digest, cut to its first `bytes` bytes where a shorter tag is enough (ETags). */
export async function sha256Hex(data: string | Uint8Array<ArrayBuffer>, bytes = 32): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", typeof data === "string" ? encoder.encode(data) : data);
  return Array.from(new Uint8Array(digest, 0, bytes), (byte) => byte.toString(16).padStart(2, "0")).join("");
}
