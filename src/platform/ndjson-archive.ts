import { gunzipSync, gzipSync } from "node:zlib";

/**
 * The ARCHIVE bucket's one object form: gzip NDJSON, one row a line. Events (src/events/archive.ts),
 * price history (src/catalogue/history-archive.ts) and webhook delivery attempts
 * (src/webhooks/delivery/delivery-archive.ts) are written and read through these.
 */

export function putNdjsonGz(bucket: R2Bucket, key: string, rows: readonly unknown[]): Promise<R2Object> {
  return bucket.put(key, gzipSync(rows.map((row) => JSON.stringify(row)).join("\n")), {
    httpMetadata: { contentType: "application/x-ndjson", contentEncoding: "gzip" },
  });
}

export async function parseNdjsonGz<T>(object: R2ObjectBody): Promise<T[]> {
  const text = new TextDecoder().decode(gunzipSync(new Uint8Array(await object.arrayBuffer())));
  return text === "" ? [] : text.split("\n").map((line) => JSON.parse(line) as T);
}

/** The rows of one object; none when there is no object. */
export async function getNdjsonGz<T>(bucket: R2Bucket, key: string): Promise<T[]> {
  const object = await bucket.get(key);
  return object ? parseNdjsonGz<T>(object) : [];
}

/**
 * Rows that may be in two places at once (a crash between an archive write and its D1 delete, or a read
 * racing a move) count once, by id; the later part wins. Sorted by `order`.
 */
export function mergeById<T extends { id: number }>(parts: readonly (readonly T[])[], order: (a: T, b: T) => number): T[] {
  const byId = new Map<number, T>();
  for (const part of parts) for (const row of part) byId.set(row.id, row);
  return [...byId.values()].sort(order);
}
