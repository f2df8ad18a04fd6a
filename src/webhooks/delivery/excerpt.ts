/** Delivery records keep the start of the receiver's answer: enough to see its error message. */
export const EXCERPT_BYTES = 1024;

/** The first EXCERPT_BYTES of `bytes` as text, cut before a UTF-8 character that would not fit whole. */
export function utf8Excerpt(bytes: Uint8Array, max = EXCERPT_BYTES): string {
  let end = Math.min(bytes.length, max);
  // A continuation byte (10xxxxxx) at the cut means the character before it is split: drop that character.
  if (bytes.length > max) while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return new TextDecoder().decode(bytes.subarray(0, end));
}

/** Reads at most EXCERPT_BYTES (+ one chunk) of the body and cancels the rest; null for an empty body. */
export async function responseExcerpt(res: Response): Promise<string | null> {
  if (!res.body) return null;
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size <= EXCERPT_BYTES) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  await reader.cancel();
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return size === 0 ? null : utf8Excerpt(bytes);
}
