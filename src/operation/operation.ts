import type { RouteConfig } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { readBodyAsJson } from "../http/json-body.ts";
import { ref } from "../http/openapi-components.ts";
import { requireAccount, requireApiKey, requireScope } from "./guards.ts";

/**
 * A route's credential, declared once: it gives the route its guard (the middleware that refuses any other
 * credential) and its OpenAPI security and error responses, so the document and the check cannot disagree.
 * `github`: a secret-scanning report, whose signature the route's own middleware verifies.
 */
type RouteCredential =
  | { credential: "api-key" | "account" | "github" }
  | { credential: "admin" /** The token's `scope` claim must hold it. */; scope: string };

const SCHEMES = { "api-key": "ApiKey", account: "AccountLogin", admin: "AdminJWT", github: "GitHubSignature" } as const;

function guardOf(required: RouteCredential): MiddlewareHandler<AppEnv>[] {
  switch (required.credential) {
    case "api-key":
      return [requireApiKey];
    case "account":
      return [requireAccount];
    case "admin":
      return [requireScope(required.scope)];
    case "github":
      return [];
  }
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
function errorResponses({ credential }: RouteCredential, cases: ErrorCases) {
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

type OperationConfig = Omit<RouteConfig, "security" | "responses"> &
  RouteCredential & {
    errors?: ErrorCases;
    responses: RouteConfig["responses"];
  };

/**
 * A createRoute config completed from its credential: the guard first (a caller without the right credential
 * hears that before anything else), then the route's own middleware, then the JSON body reader; its OpenAPI
 * security and error responses.
 */
export function operation<const C extends OperationConfig>(config: C) {
  const { credential, scope, errors = {}, responses, ...route }: C & { scope?: string } = config;
  const body = route.request?.body !== undefined;
  const middleware = [
    ...guardOf(config),
    ...[route.middleware ?? []].flat(),
    ...(body ? [readBodyAsJson(route.request?.body?.required ?? false)] : []),
  ];
  return {
    ...route,
    middleware,
    security: [{ [SCHEMES[credential]]: scope ? [scope] : [] }],
    responses: {
      ...responses,
      ...errorResponses(config, { ...errors, body: errors.body ?? body, validates: errors.validates ?? Boolean(route.request?.query) }),
    },
  } as Omit<C, "credential" | "scope" | "errors"> & { security: { [scheme: string]: string[] }[]; responses: C["responses"] };
}
