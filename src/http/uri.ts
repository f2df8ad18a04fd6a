import { z } from "zod";
import { required } from "./validation.ts";

/**
 * The one URL validator: every URL the API takes (an observation's `url`, a webhook's `url`) is an
 * absolute URI as RFC 3986 writes it, which is what the document's `format: "uri"` promises. RFC 3986
 * is ASCII only, so an internationalised host arrives punycoded (`xn--…`) and any other non-ASCII
 * character percent-encoded; the WHATWG parser alone would take `https://Ï` and encode it silently.
 */

const MAX_URL_LENGTH = 2048;

/** scheme ":" then only RFC 3986's unreserved, reserved and sub-delims characters, `%` always followed by two hex digits. */
const RFC3986_URI = /^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~!$&'()*+,;=:/?#[\]@]|%[0-9A-Fa-f]{2})*$/;

const URI_RULE = "an absolute RFC 3986 URI: ASCII only, an internationalised host punycoded (xn--…), other characters percent-encoded";

/** Why `raw` is not an absolute RFC 3986 URI (of one of `schemes`, when given): a phrase to follow the field's name, or undefined. */
export function uriProblem(raw: string, schemes?: readonly string[]): string | undefined {
  if (raw.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`;
  if (!URL.canParse(raw)) return "must be an absolute URL such as https://example.com/path";
  if (!RFC3986_URI.test(raw)) return `must be ${URI_RULE}`;
  const scheme = raw.slice(0, raw.indexOf(":")).toLowerCase();
  if (schemes && !schemes.includes(scheme)) return `must be an ${schemes.map((s) => `${s}://`).join(" or ")} URL`;
  return undefined;
}

/** A URL field: `uriProblem`'s rule, stated in the document as format uri, its pattern and length. */
export function uriSchema(description: string, schemes?: readonly string[]) {
  return z
    .string({ error: required("string") })
    .superRefine((raw, ctx) => {
      const problem = uriProblem(raw, schemes);
      if (problem) ctx.addIssue({ code: "custom", message: problem, input: raw });
    })
    .meta({ format: "uri", pattern: RFC3986_URI.source, maxLength: MAX_URL_LENGTH, description: `${description}; ${URI_RULE}` });
}
