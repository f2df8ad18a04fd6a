import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import { requestId } from "hono/request-id";
import { accountRoutes, adminAccountRoutes } from "./accounts/routes.ts";
import { apiKeyRoutes } from "./api-keys/routes.ts";
import { catalogueStore } from "./catalogue/client.ts";
import { competitorRoutes, productRoutes } from "./catalogue/routes.ts";
import { adminCompetitorRoutes } from "./competitors/routes.ts";
import { dashboardRoutes, serveDashboard } from "./dashboard/routes.ts";
import { docsRoutes, openApiRoute } from "./docs/routes.ts";
import { eventRoutes } from "./events/routes.ts";
import { ApiError, methodNotAllowedResponse, notFound, onError } from "./http/errors.ts";
import { home } from "./http/home.ts";
import { openApiApp } from "./http/openapi.ts";
import { namedQueryParameters } from "./http/query.ts";
import { mcpRoutes } from "./mcp/routes.ts";
import { admission } from "./middleware/admission.ts";
import { requestContext } from "./middleware/context.ts";
import { observationRoutes } from "./prices/routes.ts";
import { secretScanningRoutes } from "./secret-scanning/routes.ts";
import { streamRoutes } from "./stream/routes.ts";
import { webhookRoutes } from "./webhooks/routes.ts";

export const MAX_BODY_BYTES = 1024 * 1024;
const SECRET_SCANNING_PATH = "/secret-scanning/github";

/**
 * The app: the middleware every request passes, in order, then one table of every route under its
 * real prefix. Each resource's routes, schemas and service live in src/<resource>/.
 */
export function buildApp() {
  const app = openApiApp();
  app.use(requestId());
  app.use(requestContext(catalogueStore)); // config, D1 client, limiter control, queue: built once
  app.use(admission); // the credential picks the rate-limit bucket; every response carries its headers
  app.use(methodNotAllowed({ app, onMethodNotAllowed: methodNotAllowedResponse }));
  app.use(namedQueryParameters);
  const oneMiB = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new ApiError(413, "The request body is over 1 MiB; send less at a time.");
    },
  });
  // A secret-scanning report can hold 10,000 tokens and more: its route sets its own limit.
  app.use((c, next) => (c.req.path === SECRET_SCANNING_PATH ? next() : oneMiB(c, next)));

  app.get("/", home);
  app.route("/products", productRoutes); // API key
  app.route("/competitors", competitorRoutes); // API key
  app.route("/events/stream", streamRoutes); // API key, server-sent events
  app.route("/events", eventRoutes); // API key
  app.route("/mcp", mcpRoutes); // API key, Model Context Protocol (JSON-RPC over Streamable HTTP)
  app.route("/account", accountRoutes); // account login
  app.route("/api-keys", apiKeyRoutes); // account login
  app.route("/webhooks", webhookRoutes); // account login
  app.route("/admin/accounts", adminAccountRoutes); // admin, accounts:write
  app.route("/admin/observations", observationRoutes); // admin, prices:write
  app.route("/admin/competitors", adminCompetitorRoutes); // admin, prices:write
  app.route("/secret-scanning", secretScanningRoutes); // signed by GitHub
  app.route("/dashboard", dashboardRoutes);
  app.get("/dashboard/", serveDashboard);
  app.route("/docs", docsRoutes);
  app.get("/openapi.json", openApiRoute(app));

  app.notFound(notFound);
  app.onError(onError);
  return app;
}
