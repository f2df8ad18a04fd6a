import type { Context, Handler } from "hono";
import { notFound } from "./errors.ts";

/** The pages this worker serves (the dashboard, the API reference) and their bundled, content-hashed assets. */

const SCRIPT = "text/javascript; charset=utf-8";
const STYLES = "text/css; charset=utf-8";

/** `name` → body: scripts end in .js, styles in .css. Names carry a content hash, so a browser may keep them for good. */
export function hashedAssets(files: Record<string, string>): Handler {
  const assets = new Map(Object.entries(files).map(([name, body]) => [name, { body, type: name.endsWith(".css") ? STYLES : SCRIPT }]));
  return (c) => {
    const asset = assets.get(c.req.param("file") ?? "");
    if (!asset) return notFound(c);
    return c.body(asset.body, 200, {
      "Content-Type": asset.type,
      "Cache-Control": "public, max-age=31536000, immutable",
      "X-Content-Type-Options": "nosniff",
    });
  };
}

/**
 * An HTML page allowed to load only this origin's scripts and styles (and data: images); `connect`
 * names other origins its fetch() may reach. Never cached by a shared cache, never framed.
 */
export function page(
  c: Context,
  html: string,
  { connect = [], cache = "no-cache" }: { connect?: string[]; cache?: string } = {},
): Response {
  const csp = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    ["connect-src 'self'", ...connect].join(" "),
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return c.html(html, 200, {
    "Content-Security-Policy": csp,
    "Cache-Control": cache,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
  });
}
