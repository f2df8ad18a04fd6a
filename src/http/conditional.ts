import type { Context } from "hono";

/** Every client re-validates (no-cache) and no shared cache keeps a key holder's data (private). */
export const CACHE_CONTROL = "private, no-cache";

/** RFC 9110 §13.1.2: If-None-Match compares weakly and may list several tags, or be "*". */
export function ifNoneMatchHits(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const bare = (tag: string) => tag.trim().replace(/^W\//, "");
  return header.split(",").some((tag) => tag.trim() === "*" || bare(tag) === bare(etag));
}

/**
 * A JSON body with a strong ETag, or 304 with no body when the client already holds it. The body
 * is produced only when it is sent.
 */
export function conditionalJson(c: Context, etag: string, body: () => Uint8Array<ArrayBuffer>): Response {
  const headers = { ETag: etag, "Cache-Control": CACHE_CONTROL };
  if (ifNoneMatchHits(c.req.header("If-None-Match"), etag)) return c.body(null, 304, headers);
  return c.body(body(), 200, { ...headers, "Content-Type": "application/json" });
}
