import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import { requestId } from "hono/request-id";
import { accountEventRoutes } from "./account-events/routes.ts";
import { accountRoutes, adminAccountRoutes } from "./accounts/routes.ts";
import { apiKeyRoutes } from "./api-keys/routes.ts";
import { adminCompetitorRoutes, competitorRoutes, productRoutes } from "./catalogue/routes.ts";
import { oauthRoutes, wellKnownRoutes } from "./connect/routes.ts";
import { dashboardRoutes, serveDashboard } from "./dashboard/routes.ts";
import { docsRoutes, openApiRoute } from "./docs/routes.ts";
import { eventRoutes } from "./events/routes.ts";
import { exportRoutes } from "./exports/routes.ts";
import { fxRateRoutes, latestFxRateRoutes } from "./fx-rates/routes.ts";
import { acceptable } from "./http/accept.ts";
import { ApiError, methodNotAllowedResponse, notFound, onError } from "./http/errors.ts";
import { home, type RouteGroup } from "./http/home.ts";
import { openApiApp } from "./http/openapi.ts";
import { namedQueryParameters } from "./http/query.ts";
import { mcpRoutes } from "./mcp/routes.ts";
import { observationRoutes } from "./observations/routes.ts";
import { declarationOf } from "./operation/operation.ts";
import { admission } from "./pipeline/admission.ts";
import { keyDataDoor } from "./pipeline/key-data.ts";
import { requestServices } from "./pipeline/services.ts";
import { testModeRoutes } from "./sandbox/routes.ts";
import { secretScanningRoutes } from "./secret-scanning/routes.ts";
import { streamRoutes } from "./stream/routes.ts";
import { webhookRoutes } from "./webhooks/routes.ts";

/**
 * Every route group under its real prefix, with who may call it; GET / lists the groups that have a `link`,
 * so the index can never miss one.
 */
const ROUTE_TABLE: readonly RouteGroup[] = [
  { path: "/products", routes: productRoutes, access: "API key", link: "products" },
  { path: "/competitors", routes: competitorRoutes, access: "API key", link: "competitors" },
  { path: "/fx-rates", routes: latestFxRateRoutes, access: "API key", link: "fx_rates" },
  { path: "/events/stream", routes: streamRoutes, access: "API key, server-sent events", link: "event_stream" },
  { path: "/events", routes: eventRoutes, access: "API key", link: "events" },
  { path: "/test", routes: testModeRoutes, access: "test API key (pda_test_), its account's sandbox" },
  { path: "/mcp", routes: mcpRoutes, access: "API key, Model Context Protocol (JSON-RPC over Streamable HTTP)", link: "mcp" },
  {
    path: "/oauth",
    routes: oauthRoutes,
    access: "OAuth 2.1 for /mcp (one-click connect): public; its consents, account login",
    link: "oauth",
  },
  { path: "/.well-known", routes: wellKnownRoutes, access: "public: OAuth metadata of /mcp and of its authorisation server" },
  { path: "/account/events", routes: accountEventRoutes, access: "account login", link: "account_events" },
  { path: "/account", routes: accountRoutes, access: "account login", link: "account" },
  { path: "/api-keys", routes: apiKeyRoutes, access: "account login", link: "api_keys" },
  { path: "/webhooks", routes: webhookRoutes, access: "account login", link: "webhooks" },
  { path: "/exports", routes: exportRoutes, access: "account login; download URLs signed", link: "exports" },
  { path: "/admin/accounts", routes: adminAccountRoutes, access: "admin token with accounts:write" },
  { path: "/admin/observations", routes: observationRoutes, access: "admin token with prices:write" },
  { path: "/admin/competitors", routes: adminCompetitorRoutes, access: "admin token with prices:write" },
  { path: "/admin/fx-rates", routes: fxRateRoutes, access: "admin token with prices:write" },
  { path: "/secret-scanning", routes: secretScanningRoutes, access: "signed by GitHub" },
  { path: "/dashboard", routes: dashboardRoutes, access: "account login in the browser", link: "dashboard" },
  { path: "/docs", routes: docsRoutes, access: "public", link: "reference" },
];

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The app: the middleware every request passes, in order, then one table of every route under its
 * real prefix. Each resource's routes, schemas and service live in src/<resource>/.
 */
export function buildApp() {
  const app = openApiApp();
  app.use(requestId());
  app.use(requestServices); // config, D1 client, the keys' objects, queue: built once
  app.use(admission); // the credential picks the rate-limit bucket; every response carries its headers
  app.use(keyDataDoor); // an admitted key's environment picks its data, once
  app.use(methodNotAllowed({ app, onMethodNotAllowed: methodNotAllowedResponse }));
  app.use(namedQueryParameters);
  app.use(acceptable((c) => declarationOf(c)?.serves)); // Accept: text/csv on a JSON route is 406, not JSON
  const oneMiB = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new ApiError(413, "The request body is over 1 MiB; send less at a time.");
    },
  });
  // A route that declares its own body limit (a secret-scanning report can hold 10,000 tokens and more) sets it.
  app.use((c, next) => (declarationOf(c)?.ownBodyLimit ? next() : oneMiB(c, next)));

  for (const { path, routes } of ROUTE_TABLE) app.route(path, routes);
  app.get("/", home(ROUTE_TABLE));
  app.get("/dashboard/", serveDashboard);
  app.get("/openapi.json", openApiRoute(app));

  app.notFound(notFound);
  app.onError(onError);
  return app;
}
