import { OpenAPIHono, type RouteConfig } from "@hono/zod-openapi";
import type { z } from "zod";
import type { AppEnv } from "./app-env.ts";
import { readBodyAsJson } from "./json-body.ts";
import { EVERY, type HeaderName, headerRefs, ref } from "./openapi-components.ts";
import { validationHook } from "./validation.ts";

/**
 * The OpenAPI side of the routes. Each route is declared once with @hono/zod-openapi's `createRoute`:
 * its query, path and body schemas are what the request is validated with (through `validationHook`,
 * one 400 for all), its response schemas are what the handler is type-checked against, and
 * GET /openapi.json is generated from those declarations (src/docs/document.ts).
 */

/** Every route module's app: validation failures become our ApiError 400 (src/http/validation.ts). */
export const openApiApp = () => new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

export type Credential = "api-key" | "account" | "admin" | "github";

const SCHEMES = { "api-key": "ApiKey", account: "AccountLogin", admin: "AdminJWT", github: "GitHubSignature" } as const;
const security = (credential: Credential, scope?: string) => [{ [SCHEMES[credential]]: credential === "admin" && scope ? [scope] : [] }];

/** A JSON response whose body is `schema`, with the headers every response carries plus `extra`. */
export function jsonResponse<S extends z.ZodType>(description: string, schema: S, extra: readonly HeaderName[] = []) {
  return { description, headers: headerRefs([...EVERY, ...extra]), content: { "application/json": { schema } } };
}

/** A response without a body (204, 304). */
export function emptyResponse(description: string, extra: readonly HeaderName[] = []) {
  return { description, headers: headerRefs([...EVERY, ...extra]) };
}

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
    401: ref(credential === "github" ? "BadSignature" : "Unauthorized"),
    ...(credential === "github" ? {} : { 403: ref(credential === "api-key" ? "KeyRestricted" : "Forbidden") }),
    ...(cases.notFound ? { 404: ref("NotFound") } : {}),
    ...(cases.conflict ? { 409: ref("Conflict") } : {}),
    ...(cases.body ? { 413: ref("PayloadTooLarge") } : {}),
    429: ref("TooManyRequests"),
    500: ref("InternalError"),
    ...(credential === "api-key" ? {} : { 503: ref("Unavailable") }),
  };
}

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
  // After the route's own guards, so a caller without the right credential hears that first.
  const middleware = body ? [...[route.middleware ?? []].flat(), readBodyAsJson(route.request?.body?.required ?? false)] : route.middleware;
  return {
    ...route,
    middleware,
    security: security(credential, scope),
    responses: {
      ...responses,
      ...errorResponses(credential, { ...errors, body: errors.body ?? body, validates: errors.validates ?? Boolean(route.request?.query) }),
    },
  } as Omit<C, "credential" | "scope" | "errors"> & { security: ReturnType<typeof security>; responses: C["responses"] };
}
