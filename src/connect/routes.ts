import { createRoute } from "@hono/zod-openapi";
import { type Context, Hono } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { jsonBody, jsonResponse, type OpenApiApp, openApiAppOf } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { Consent, ConsentOutcome, consentAnswerBody, consentHandleParam } from "./schema.ts";
import { authorizationServer, CONNECTOR_SCOPES, MCP_PATH, oauthHelpers } from "./server.ts";
import { answerConsent, readConsent, startConsent } from "./service.ts";

/**
 * One-click connect's routes. The protocol's own endpoints (metadata, registration, token, authorize) are not
 * operations of the OpenAPI document, as /mcp is not: OAuth is its own protocol, described by its metadata. They pass
 * the app's admission like any call without an API key (the client IP's bucket) and the library answers them.
 * The consent's two routes are the dashboard's, with the account login: they are operations.
 */

const origin = (c: Context) => new URL(c.req.url).origin;

/** The library's answer to a protocol request, its KV operations counted in the request's tally. */
const byLibrary = (c: Context<AppEnv>) =>
  // Hono types the context's ExecutionContext as its own, narrower one; it is the runtime's.
  authorizationServer(origin(c)).fetch(c.req.raw, { OAUTH_KV: c.var.services.oauthKv }, c.executionCtx as ExecutionContext);

/** /.well-known: where an MCP client, refused by /mcp, finds how to be let in (RFC 9728, then RFC 8414). */
export const wellKnownRoutes = new Hono<AppEnv>()
  .on(["GET", "HEAD"], ["/oauth-protected-resource", `/oauth-protected-resource${MCP_PATH}`], (c) =>
    c.json(
      {
        resource: `${origin(c)}${MCP_PATH}`,
        authorization_servers: [origin(c)],
        scopes_supported: [...CONNECTOR_SCOPES],
        bearer_methods_supported: ["header"],
        resource_name: "Price Data API (Model Context Protocol)",
      },
      200,
      // Read by clients in browsers too (an MCP inspector), as the library's own metadata is.
      { "Access-Control-Allow-Origin": "*" },
    ),
  )
  .on(["GET", "HEAD", "OPTIONS"], "/oauth-authorization-server", byLibrary);

const consentCommon = { tags: ["One-click connect"], credential: "account" as const };

const getConsentRoute = createRoute(
  operation({
    ...consentCommon,
    method: "get",
    path: "/consents/{handle}",
    operationId: "getConsent",
    summary: "What an AI client connecting to /mcp asks of this account",
    description:
      "The dashboard's consent page reads it after GET /oauth/authorize sent the browser there (`#connect=<handle>`): the client's " +
      "self-asserted name, where its access will be sent, and the scopes it asks for. A handle works for 10 minutes, once.",
    request: { params: consentHandleParam, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The consent awaiting an answer", Consent) },
  }),
);

const registerGetConsent = (app: OpenApiApp) =>
  app.openapi(getConsentRoute, async (c) => c.json(await readConsent(c.var.services.oauthKv, c.req.valid("param").handle), 200));

const answerConsentRoute = createRoute(
  operation({
    ...consentCommon,
    method: "post",
    path: "/consents/{handle}",
    operationId: "answerConsent",
    summary: "Connect an AI client to /mcp, or refuse it",
    description:
      "Sent from the browser that GET /oauth/authorize bound the handle to (its `__Host-oauth-consent-…` cookie; elsewhere 403). " +
      "Allowed: a connector key of this account is made (`kind: connector` in GET /api-keys, named after the client, with the " +
      "scopes chosen and the plan's limits) and the client's OAuth tokens act as it until it is revoked (DELETE /api-keys/{id}: " +
      "its tokens are refused from their next request). Either way, `redirect_to` is where the browser goes next. At most 100 " +
      "keys of an account can authenticate (409).",
    request: { params: consentHandleParam, query: noQuery, body: jsonBody(consentAnswerBody, "Allow or refuse, and the scopes") },
    errors: { notFound: true, conflict: true },
    responses: { 200: jsonResponse("Where the browser goes next", ConsentOutcome, ["Cache-Control"]) },
  }),
);

const registerAnswerConsent = (app: OpenApiApp) =>
  app.openapi(answerConsentRoute, async (c) => {
    const kv = c.var.services.oauthKv;
    const { outcome, headers } = await answerConsent(c.var.services, oauthHelpers(origin(c), kv), kv, {
      accountId: c.var.account.id,
      handle: c.req.valid("param").handle,
      answer: c.req.valid("json"),
      request: c.req.raw,
    });
    const res = c.json(outcome, 200, { "Cache-Control": "no-store" });
    for (const cookie of headers.getSetCookie()) res.headers.append("Set-Cookie", cookie);
    return res;
  });

/** /oauth: the authorisation server's endpoints, and the consent the dashboard asks. */
export const oauthRoutes = openApiAppOf(registerGetConsent, registerAnswerConsent)
  .get("/authorize", (c) => startConsent(oauthHelpers(origin(c), c.var.services.oauthKv), c.var.services.oauthKv, c.req.raw))
  .on(["POST", "OPTIONS"], ["/token", "/register"], byLibrary);
