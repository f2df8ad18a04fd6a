import type { RouteConfig } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { KeyScope } from "../api-keys/scopes.ts";
import type { AppEnv } from "../http/app-env.ts";
import { documentRulesOf } from "../http/document-rules.ts";
import { readBodyAsJson } from "../http/json-body.ts";
import { ref } from "../http/openapi-components.ts";
import type { Environment } from "../platform/tables.ts";
import { budgetPeriod } from "../rate-limit/headers.ts";
import type { Budget } from "../rate-limit/types.ts";
import { requireAccount, requireApiKey, requireScope } from "./guards.ts";

/**
 * A route's credential, declared once: it gives the route its guard (the middleware that refuses any other
 * credential), its OpenAPI security (with the scope) and error responses, and its rate-limit bucket (the key's own,
 * the account's, the admin subject's, or, for `github`, the secret-scanning reports'), so the document, the check and
 * the admission cannot disagree. `github`: a secret-scanning report, whose signature the route's own middleware verifies.
 */
type RouteCredential =
  | ({
      credential: "api-key" /** The key scope the route needs: a key without it is refused (403) by its object. */;
      scope: KeyScope;
    } & KeyRoute)
  | { credential: "account" | "github" }
  | { credential: "admin" /** The token's `scope` claim must hold it. */; scope: string };

/** What an API-key route declares beside its scope; its key's object checks both at admission, before the key's limits. */
interface KeyRoute {
  /** The environment whose keys the route takes (a sandbox's writes: `test`); absent, either. Another key: 403. */
  environment?: Environment;
  /** A budget of the key's own that some of the route's requests count in beside the key's limits (src/rate-limit/types.ts). */
  budget?: RouteBudget;
}

/** A route's budget, and which of its requests count in it: decided from the request before admission (its query, its headers). */
export interface RouteBudget extends Budget {
  counts(c: Context): boolean;
  /** What it covers, in words: the 429's detail and the operation's description say it. */
  covers: string;
}

/** What the request pipeline (src/pipeline/) needs to know of a route before the route runs. */
type DeclaredOptions = RouteCredential & {
  /** The route reads its body under a limit of its own, not the app's 1 MiB (a secret-scanning report). */
  ownBodyLimit?: true;
};
export type RouteDeclaration = DeclaredOptions & {
  /** The media types its successes answer with, from its responses (an Accept admitting none is 406: src/http/accept.ts). */
  serves: readonly string[];
};

/**
 * Each declared route's first middleware, to its declaration: the pipeline finds the route a request matched among
 * Hono's matched routes (`matchedRoutes`, which the app's own middleware sees before the route runs), so what a route
 * needs is read from its declaration, never worked out again from its path.
 */
const declarations = new WeakMap<object, RouteDeclaration>();

/** The declaration of the route this request matched; undefined for a path no operation() route serves (404, 405, pages). */
export function declarationOf(c: Context): RouteDeclaration | undefined {
  for (const { handler } of matchedRoutes(c)) {
    const declared = declarations.get(handler);
    if (declared) return declared;
  }
  return undefined;
}

const SCHEMES = { "api-key": "ApiKey", account: "AccountLogin", admin: "AdminJWT", github: "GitHubSignature" } as const;

function guardOf(required: RouteCredential): MiddlewareHandler<AppEnv> {
  switch (required.credential) {
    case "api-key":
      return requireApiKey;
    case "account":
      return requireAccount;
    case "admin":
      return requireScope(required.scope);
    case "github":
      return (_c, next) => next();
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
function errorResponses({ credential }: RouteCredential, cases: ErrorCases & { serves: readonly string[] }) {
  return {
    ...(cases.validates || cases.body ? { 400: ref("BadRequest") } : {}),
    401: ref(credential === "github" ? "BadSignature" : "Unauthorized"),
    ...(credential === "github" ? {} : { 403: ref(credential === "api-key" ? "KeyRestricted" : "Forbidden") }),
    ...(cases.notFound ? { 404: ref("NotFound") } : {}),
    ...(cases.serves.length > 0 ? { 406: ref("NotAcceptable") } : {}),
    ...(cases.conflict ? { 409: ref("Conflict") } : {}),
    ...(cases.body ? { 413: ref("PayloadTooLarge") } : {}),
    429: ref("TooManyRequests"),
    500: ref("InternalError"),
    ...(credential === "api-key" ? {} : { 503: ref("Unavailable") }),
  };
}

/** The document's words for a route's environment and budget, from its declaration. */
const takesOnly = (environment: Environment) =>
  `Takes ${environment} keys only (pda_${environment}_…): another key is 403, before its limits are counted or the request is read.`;
const countsIn = (budget: RouteBudget) =>
  `${budget.covers[0]!.toUpperCase()}${budget.covers.slice(1)} count in the key's "${budget.name}" budget, ${budget.quota} per ` +
  `${budgetPeriod(budget)} (clock-aligned), ` +
  "beside its limits: beyond it, 429 naming the budget and when it refills; RateLimit-Policy and RateLimit carry it as an entry of its own.";

type OperationConfig = Omit<RouteConfig, "security" | "responses"> &
  DeclaredOptions & {
    errors?: ErrorCases;
    responses: RouteConfig["responses"];
  };

/**
 * A createRoute config completed from its declaration: the guard first (a caller without the right credential
 * hears that before anything else), then the route's own middleware, then the JSON body reader; its OpenAPI
 * security (the scheme, with the scope the route needs) and error responses. The guard, a function of this route's
 * own, is what the pipeline finds the declaration by.
 */
export function operation<const C extends OperationConfig>(config: C) {
  const {
    credential,
    scope,
    environment,
    budget,
    ownBodyLimit,
    errors = {},
    responses,
    ...route
  }: C & KeyRoute & { scope?: string } = config;
  const body = route.request?.body !== undefined;
  const guard = guardOf(config);
  const declared: MiddlewareHandler<AppEnv> = (c, next) => guard(c, next);
  const serves = Object.entries(responses)
    .filter(([status]) => status.startsWith("2"))
    .flatMap(([, response]) => Object.keys((response as { content?: object }).content ?? {}));
  declarations.set(declared, { credential, scope, environment, budget, serves, ...(ownBodyLimit && { ownBodyLimit }) } as RouteDeclaration);
  const middleware = [
    declared,
    ...[route.middleware ?? []].flat(),
    ...(body ? [readBodyAsJson(route.request?.body?.required ?? false)] : []),
  ];
  // A query's parameters are no one JSON Schema object: what its refinements check is stated on the operation.
  const queryRules = route.request?.query ? documentRulesOf(route.request.query) : [];
  return {
    ...route,
    ...(queryRules.length > 0 && { "x-rules": queryRules }),
    description:
      [route.description, environment && takesOnly(environment), budget && countsIn(budget)].filter(Boolean).join(" ") || undefined,
    middleware,
    security: [{ [SCHEMES[credential]]: scope ? [scope] : [] }],
    responses: {
      ...responses,
      ...errorResponses(config, {
        ...errors,
        body: errors.body ?? body,
        validates: errors.validates ?? Boolean(route.request?.query),
        serves,
      }),
    },
  } as Omit<C, "credential" | "scope" | "environment" | "budget" | "ownBodyLimit" | "errors"> & {
    security: { [scheme: string]: string[] }[];
    responses: C["responses"];
  };
}
