import { OpenAPIHono } from "@hono/zod-openapi";
import type { z } from "zod";
import type { AppEnv } from "./app-env.ts";
import { EVERY, type HeaderName, headerRefs } from "./openapi-components.ts";
import { validationHook } from "./validation.ts";

/**
 * The OpenAPI side of the routes. Each route is declared once with @hono/zod-openapi's `createRoute`:
 * its query, path and body schemas are what the request is validated with (through `validationHook`,
 * one 400 for all), its response schemas are what the handler is type-checked against, and
 * GET /openapi.json is generated from those declarations (src/docs/document.ts). A route's credential, its
 * guard and its security come from `operation` (src/operation/operation.ts).
 */

/** Every route module's app: validation failures become our ApiError 400 (src/http/validation.ts). */
export const openApiApp = () => new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

/** What an operation registers itself on: a route module's app (src/webhooks/routes/create-webhook.ts, for one). */
export type OpenApiApp = ReturnType<typeof openApiApp>;

/**
 * A route module's app with its operations registered, each by the function its file exports, in the order given: the
 * order the OpenAPI document lists them in.
 */
export function openApiAppOf(...operations: ((app: OpenApiApp) => unknown)[]): OpenApiApp {
  const app = openApiApp();
  for (const register of operations) register(app);
  return app;
}

/** A JSON response whose body is `schema`, with the headers every response carries plus `extra`. */
export function jsonResponse<S extends z.ZodType>(description: string, schema: S, extra: readonly HeaderName[] = []) {
  return { description, headers: headerRefs([...EVERY, ...extra]), content: { "application/json": { schema } } };
}

/** A response without a body (204, 304). */
export function emptyResponse(description: string, extra: readonly HeaderName[] = []) {
  return { description, headers: headerRefs([...EVERY, ...extra]) };
}

/** A request body: read as JSON whatever its Content-Type (contract), so declared as application/json for clients. */
export const jsonBody = <S extends z.ZodType>(schema: S, description: string) =>
  ({ required: true, description, content: { "application/json": { schema } } }) as const;
