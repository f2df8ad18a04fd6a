import { OpenAPIHono, type RouteConfig, type RouteHandler } from "@hono/zod-openapi";
import type { z } from "zod";
import type { AppEnv } from "../app-env.ts";
import { validationHook } from "../validation.ts";
import { registerWebhookEvents } from "./events.ts";
import { ErrorBody } from "./responses.ts";

/**
 * The OpenAPI side of the routes. Each route is declared once with @hono/zod-openapi's `createRoute`:
 * its query and path schemas are what the request is validated with (through `validationHook`, the
 * same 400 as src/validation.ts), its body and response schemas are the ones the handler parses with
 * and is type-checked against, and GET /openapi.json is generated from those declarations.
 */

/** Every route module's app: validation failures become our ApiError 400 (src/validation.ts). */
export const openApiApp = () => new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

// ---- Security schemes ---------------------------------------------------------------------------

export const SECURITY_SCHEMES = {
  ApiKey: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "pda_live_<46 characters>",
    description:
      "An API key, for the data routes only. Create one with POST /api-keys (account login). " +
      "Each key has its own rate limit, set by its account's plan. Keep keys in server-side code.",
  },
  AccountLogin: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description:
      "An access token (JWT) from the identity provider; its `sub` is the account, created on the Free plan when first seen. " +
      "Needed to manage keys, webhooks and the account: an API key is refused there (403).",
  },
  AdminJWT: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description:
      "An identity-provider JWT whose space-separated `scope` claim holds the scope an operation names " +
      "(`accounts:write` for plan changes, `prices:write` for price observations); without it, 403.",
  },
} as const;

export type Credential = "api-key" | "account" | "admin";

const security = (credential: Credential, scope?: string) =>
  credential === "api-key" ? [{ ApiKey: [] }] : credential === "account" ? [{ AccountLogin: [] }] : [{ AdminJWT: scope ? [scope] : [] }];

// ---- Headers ------------------------------------------------------------------------------------

const intHeader = (description: string) => ({ required: true, description, schema: { type: "integer", minimum: 0 } }) as const;
const textHeader = (description: string, required = true) => ({ required, description, schema: { type: "string" } }) as const;

/** On every response the worker produces, whatever its status. */
export const EVERY_RESPONSE_HEADERS = {
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

type HeaderName = keyof typeof HEADER_COMPONENTS;
const headerRefs = (names: readonly HeaderName[]) =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));
const EVERY = Object.keys(EVERY_RESPONSE_HEADERS) as HeaderName[];

// ---- Responses ----------------------------------------------------------------------------------

/** A JSON response whose body is `schema`, with the headers every response carries plus `extra`. */
export function jsonResponse<S extends z.ZodType>(description: string, schema: S, extra: readonly HeaderName[] = []) {
  return { description, headers: headerRefs([...EVERY, ...extra]), content: { "application/json": { schema } } };
}

/** A response without a body (204, 304). */
export function emptyResponse(description: string, extra: readonly HeaderName[] = []) {
  return { description, headers: headerRefs([...EVERY, ...extra]) };
}

/** components.responses are written as they are, not converted from zod: the body is a reference to ErrorBody's component. */
const errorResponse = (description: string, extra: readonly HeaderName[] = []) => ({
  description,
  headers: headerRefs([...EVERY, ...extra]),
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
});

/** The shared error responses (components.responses), referenced by the operations. */
export const RESPONSE_COMPONENTS = {
  BadRequest: errorResponse("The body, query or a path parameter failed validation; the detail names the field."),
  Unauthorized: errorResponse("No credential, a malformed, unknown, revoked or expired one, or the wrong kind (a JWT on a data route).", ["WWW-Authenticate"]),
  Forbidden: errorResponse("An API key on an account or admin route, or a JWT without the operation's scope."),
  NotFound: errorResponse("No such id in this account (another account's ids are 404 too), or no such route."),
  MethodNotAllowed: errorResponse("The path exists but not with this method (any path in this document).", ["Allow"]),
  Conflict: errorResponse("The account is at a limit (100 active keys, 20 webhooks), or the webhook is disabled."),
  PayloadTooLarge: errorResponse("The body is over 1 MiB."),
  TooManyRequests: errorResponse(
    "Rate limit exceeded (`Rate limit exceeded: 10 requests per minute.`). Wait Retry-After seconds (60 when absent), " +
      "and back off exponentially on repeated 429s. Refused requests are not counted.",
    ["Retry-After"],
  ),
  InternalError: errorResponse("A generic detail (the cause is logged), or the server is misconfigured (the detail names the variable)."),
  Unavailable: errorResponse("The identity provider's keys could not be fetched; try again.", ["Retry-After"]),
} as const;

const ref = (name: keyof typeof RESPONSE_COMPONENTS) => ({ $ref: `#/components/responses/${name}` });

export interface ErrorCases {
  /** The route validates a query, path parameter or body (400). */
  validates?: boolean;
  /** The route takes a body (413). */
  body?: boolean;
  /** The route names a resource by id (404). */
  notFound?: boolean;
  /** The route can meet a limit or state conflict (409). */
  conflict?: boolean;
}

/** The error responses an operation can give, from its credential and what it does. */
function errorResponses(credential: Credential, cases: ErrorCases) {
  return {
    ...(cases.validates || cases.body ? { 400: ref("BadRequest") } : {}),
    401: ref("Unauthorized"),
    ...(credential === "api-key" ? {} : { 403: ref("Forbidden") }),
    ...(cases.notFound ? { 404: ref("NotFound") } : {}),
    ...(cases.conflict ? { 409: ref("Conflict") } : {}),
    ...(cases.body ? { 413: ref("PayloadTooLarge") } : {}),
    429: ref("TooManyRequests"),
    500: ref("InternalError"),
    ...(credential === "api-key" ? {} : { 503: ref("Unavailable") }),
  };
}

// ---- Routes -------------------------------------------------------------------------------------

/** A request body: read as JSON whatever its Content-Type (contract), so declared as application/json for clients. */
export const jsonBody = <S extends z.ZodType>(schema: S, description: string) =>
  ({ required: true, description, content: { "application/json": { schema } } }) as const;

type OperationConfig = Omit<RouteConfig, "security" | "responses"> & {
  credential: Credential;
  /** For the admin credential: the scope the token's `scope` claim must hold. */
  scope?: string;
  errors?: ErrorCases;
  responses: RouteConfig["responses"];
};

/** A createRoute config with its security and error responses filled in from its credential. */
export function operation<const C extends OperationConfig>({ credential, scope, errors = {}, responses, ...route }: C) {
  const body = route.request?.body !== undefined;
  return {
    ...route,
    security: security(credential, scope),
    responses: { ...responses, ...errorResponses(credential, { ...errors, body: errors.body ?? body, validates: errors.validates ?? Boolean(route.request?.query) }) },
  } as Omit<C, "credential" | "scope" | "errors"> & { security: ReturnType<typeof security>; responses: C["responses"] };
}

/**
 * `app.openapi(route, handler)`, except for the body: the document lists `route.request.body`, but
 * @hono/zod-openapi's own body validator is left out because it refuses (415) or skips bodies without
 * a JSON Content-Type, and the contract reads a body as JSON whatever its Content-Type. The handler
 * reads it with parseJsonBody(c, schema), the same schema object the document shows.
 */
export function serve<R extends RouteConfig>(app: OpenAPIHono<AppEnv>, route: R, handler: RouteHandler<R, AppEnv>): void {
  const { middleware: _middleware, hide: _hide, ...documented } = route;
  if (!route.request?.body) {
    app.openapi(route, handler as never);
    return;
  }
  const { body: _body, ...request } = route.request;
  app.openAPIRegistry.registerPath(documented);
  app.openapi({ ...route, request, hide: true }, handler as never);
}

// ---- The document -------------------------------------------------------------------------------

const DESCRIPTION = `Competitor prices for your products, read with API keys; keys, webhooks and the account are managed with the account login.

**Rate limits.** Every response carries X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, RateLimit and RateLimit-Policy, from the bucket the request was counted in: the API key (its plan: 10, 60 or 300 a minute), the account (60 a minute) for an account login, the admin subject (600 a minute) on /admin, otherwise the client IP (30 a minute). On 429, wait Retry-After seconds (60 when absent) and back off exponentially on repeated 429s.

**Errors** are always \`{"detail": "…"}\`. Any path answers 405 (with Allow) to a method it does not have, and an unknown path 404. Bodies are read as JSON whatever their Content-Type; unknown fields and unknown query parameters are refused (400).`;

/** Builds the OpenAPI 3.1 document from the routes registered on `app` (and those mounted into it). */
export function openApiDocument(app: OpenAPIHono<AppEnv>) {
  const registry = app.openAPIRegistry;
  registry.register("Error", ErrorBody);
  for (const [name, scheme] of Object.entries(SECURITY_SCHEMES)) registry.registerComponent("securitySchemes", name, scheme);
  for (const [name, header] of Object.entries(HEADER_COMPONENTS)) registry.registerComponent("headers", name, header);
  for (const [name, response] of Object.entries(RESPONSE_COMPONENTS)) registry.registerComponent("responses", name, response);
  registerWebhookEvents(registry);
  return app.getOpenAPI31Document({
    openapi: "3.1.0",
    info: { title: "Price Data API", version: "0.1.0", description: DESCRIPTION },
    tags: [
      { name: "Catalogue", description: "Products, their offers and history, and competitors (API key)" },
      { name: "Account", description: "The account and its plan (account login)" },
      { name: "API keys", description: "Create, list, rename and revoke keys (account login)" },
      { name: "Webhooks", description: "Price and stock change notifications, signed per Standard Webhooks (account login)" },
      { name: "Admin", description: "Plans and price ingestion (admin JWT with a scope)" },
    ],
  });
}
