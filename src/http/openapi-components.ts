import { z } from "zod";

/**
 * The OpenAPI document's shared components: security schemes, the headers, the error body and the
 * error responses the operations refer to (src/http/openapi.ts), registered by src/docs/document.ts.
 */

export const ErrorBody = z
  .object({
    detail: z.string().min(1).meta({ description: "One sentence a person can act on" }),
    help: z.string().min(1).optional().meta({
      description:
        "What to change, where the detail's words are fixed: on a 429 for a rate limit, when to retry and, for an API key's plan, which plans allow more.",
    }),
  })
  .meta({ id: "Error", description: "Every error: one sentence saying what went wrong and what to do." });

export const SECURITY_SCHEMES = {
  ApiKey: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "pda_live_<46 characters>",
    description:
      "An API key, for the data routes only. Create one with POST /api-keys (account login). Each key has its own rate limit, set by " +
      "its account's plan. Keep keys in server-side code. Each operation's security requirement names the key scope it needs " +
      '(`ApiKey: ["products:read"]`); a key without it is refused (403).',
  },
  AccountLogin: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description:
      "An access token (JWT) from the identity provider; its `sub` is the account, created on the Free plan when first seen. Needed to " +
      "manage keys, webhooks and the account: an API key is refused there (403).",
  },
  AdminJWT: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description:
      "An identity-provider JWT whose space-separated `scope` claim holds the scope an operation names (`accounts:write` for plan " +
      "changes, `prices:write` for price observations); without it, 403.",
  },
  GitHubSignature: {
    type: "apiKey",
    in: "header",
    name: "Github-Public-Key-Signature",
    description:
      "GitHub's secret-scanning signature: base64 DER ECDSA P-256 / SHA-256 of the raw body, by the key Github-Public-Key-Identifier " +
      "names in GitHub's published list. No Authorization header.",
  },
} as const;

const intHeader = (description: string) => ({ required: true, description, schema: { type: "integer", minimum: 0 } }) as const;
const textHeader = (description: string, required = true) => ({ required, description, schema: { type: "string" } }) as const;

/** On every response the worker produces, whatever its status. */
const EVERY_RESPONSE_HEADERS = {
  "X-Request-Id": textHeader("Quote it when reporting a problem."),
  "X-RateLimit-Limit": intHeader("Requests per minute of the bucket this request was counted in (the key's plan for an API key)."),
  "X-RateLimit-Remaining": intHeader("Requests left in the current minute window."),
  "X-RateLimit-Reset": intHeader("Whole seconds until Remaining next goes up; on a 429, equal to Retry-After."),
  RateLimit: textHeader('IETF RateLimit field, e.g. `"minute";r=9;t=60`.'),
  "RateLimit-Policy": textHeader('IETF RateLimit-Policy field, e.g. `"minute";q=10;w=60, "hour";q=600;w=3600, "day";q=14400;w=86400`.'),
} as const;

export const HEADER_COMPONENTS = {
  ...EVERY_RESPONSE_HEADERS,
  "Retry-After": { ...intHeader("Whole seconds to wait before the next request (at least 1)."), schema: { type: "integer", minimum: 1 } },
  "WWW-Authenticate": textHeader('`Bearer realm="price-data-api"`, with `error="invalid_token"` when a token was sent.'),
  Allow: textHeader("The methods the path accepts."),
  ETag: textHeader("Strong ETag of the catalogue version (and filter); send it back in If-None-Match."),
  "Cache-Control": textHeader("`private, no-cache` on catalogue reads; `no-store` on responses that hold a secret."),
  "X-Result-Truncated": textHeader("`true` when the history was cut at 1,000 rows; absent otherwise.", false),
} as const;

export type HeaderName = keyof typeof HEADER_COMPONENTS;
export const headerRefs = (names: readonly HeaderName[]) =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
export const EVERY = Object.keys(EVERY_RESPONSE_HEADERS) as HeaderName[];

/** components.responses are written as they are, not converted from zod: the body is a reference to ErrorBody's component. */
const documentedError = (description: string, extra: readonly HeaderName[] = []) => ({
  description,
  headers: headerRefs([...EVERY, ...extra]),
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
});

/** The shared error responses (components.responses), referenced by the operations. */
export const RESPONSE_COMPONENTS = {
  BadRequest: documentedError("The body, query or a path parameter failed validation; the detail names the field."),
  Unauthorized: documentedError("No credential, a malformed, unknown, revoked or expired one, or the wrong kind (a JWT on a data route).", [
    "WWW-Authenticate",
  ]),
  BadSignature: documentedError(
    "The report's GitHub signature is missing or does not verify, or names a key not in GitHub's list; nothing was changed.",
  ),
  KeyRestricted: documentedError(
    "The key is of an environment the route does not take (a live key on a test-mode route), may not be used from this " +
      "address (its allowed_ips), or lacks the scope this route needs (its scopes); the detail names which. Not counted " +
      "against the key, and answered before its limits or the request's body.",
  ),
  Forbidden: documentedError("An API key on an account or admin route, or a JWT without the operation's scope."),
  NotFound: documentedError("No such id in this account (another account's ids are 404 too), or no such route."),
  MethodNotAllowed: documentedError("The path exists but not with this method (any path in this document).", ["Allow"]),
  NotAcceptable: documentedError(
    "The Accept header admits none of the media types this operation answers with (its 2xx content: application/json, " +
      "and text/event-stream or application/x-ndjson where listed); the detail names them. No Accept, */* and application/* are fine.",
  ),
  Conflict: documentedError("The account is at a limit (100 active keys, 20 webhooks), or the webhook is disabled."),
  PayloadTooLarge: documentedError("The body is over 1 MiB."),
  TooManyRequests: documentedError(
    "Rate limit exceeded (detail `Rate limit exceeded: 10 requests per minute.`; `help` says when to retry and, for an API key's " +
      "plan limit, which plan allows more), or a budget of the route's (its detail names it " +
      "and when it refills). Wait Retry-After seconds (60 when absent), " +
      "and back off exponentially on repeated 429s. Refused requests are not counted.",
    ["Retry-After"],
  ),
  InternalError: documentedError("A generic detail (the cause is logged), or the server is misconfigured (the detail names the variable)."),
  Unavailable: documentedError("The identity provider's keys could not be fetched; try again.", ["Retry-After"]),
  CatalogueBuilding: documentedError(
    "The catalogue's first snapshot is being built (a new deployment, or a freshly seeded catalogue), or the whole catalogue in a currency asked for the first time today is being converted (a large catalogue's, `?currency=` without filters): retry after Retry-After seconds.",
    ["Retry-After"],
  ),
} as const;

export const ref = (name: keyof typeof RESPONSE_COMPONENTS) => ({ $ref: `#/components/responses/${name}` });
