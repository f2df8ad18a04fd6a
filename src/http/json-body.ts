import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";

/**
 * A body is read as JSON whatever its Content-Type says, or without one (the contract: the spec makes
 * the header optional, and `curl -d` sends a form type). This parses it once, with a detail a person
 * can act on when it is not JSON, and hands the routes' stock @hono/zod-openapi validators a request
 * labelled application/json, whose cached body they read. src/http/openapi.ts puts it on every route
 * that declares a body, after the route's guards. An empty body is refused where the body is required,
 * and is no body where it is optional (the route's defaults apply).
 */
export const readBodyAsJson =
  (required: boolean): MiddlewareHandler =>
  async (c, next) => {
    // Decoded by hand: the runtime warns when .text() reads a body whose Content-Type is not text.
    const bytes = await c.req.arrayBuffer();
    const text = new TextDecoder().decode(bytes);
    const headers = new Headers(c.req.raw.headers);
    const empty = text.trim() === "";
    let parsed: unknown;
    if (empty) {
      if (required) throw new ApiError(400, "The request body is empty; send a JSON object.");
      headers.delete("Content-Type");
    } else {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new ApiError(400, "The request body is not valid JSON.");
      }
      headers.set("Content-Type", "application/json");
    }
    c.req.raw = new Request(c.req.raw, { headers, body: empty ? null : bytes });
    if (!empty) c.req.bodyCache.json = Promise.resolve(parsed); // the validator reads this, not the bytes again
    await next();
  };
