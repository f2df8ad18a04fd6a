import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import { requestId } from "hono/request-id";
import type { AppEnv } from "./app-env.ts";
import { readConfig } from "./env.ts";
import { ApiError, methodNotAllowedResponse, notFound, onError } from "./errors.ts";
import { accountRoutes, adminAccountRoutes } from "./routes/account.ts";
import { apiKeyRoutes } from "./routes/api-keys.ts";
import { catalogueRoutes } from "./routes/catalogue.ts";
import { observationRoutes } from "./routes/observations.ts";
import { webhookRoutes } from "./routes/webhooks.ts";
import { dashboardRoutes } from "./routes/dashboard.ts";
import { docsRoutes } from "./routes/docs.ts";
import { openApiApp, openApiDocument } from "./routes/openapi.ts";
import { admission } from "./rate-limit/middleware.ts";

export const MAX_BODY_BYTES = 1024 * 1024;

export function buildApp() {
  const app = openApiApp();
  app.use(requestId());
  app.use(admission);
  app.use(async (c, next) => {
    const config = readConfig(c.env);
    if (typeof config === "string") throw new ApiError(500, config);
    c.set("config", config);
    await next();
  });
  app.use(methodNotAllowed({ app, onMethodNotAllowed: methodNotAllowedResponse }));
  app.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError(413, "The request body is over 1 MiB; send less at a time.");
      },
    }),
  );

  app.route("/account", accountRoutes);
  app.route("/api-keys", apiKeyRoutes);
  app.route("/admin/accounts", adminAccountRoutes);
  app.route("/admin/observations", observationRoutes);
  app.route("/webhooks", webhookRoutes);
  app.route("/", dashboardRoutes);
  app.route("/", catalogueRoutes);

  // The description of the routes above (generated from their declarations once, on first request) and its reference page.
  let document: string | undefined;
  app.get("/openapi.json", (c) => {
    document ??= JSON.stringify(openApiDocument(app));
    return c.body(document, 200, { "Content-Type": "application/json", "Cache-Control": "public, max-age=300" });
  });
  app.route("/", docsRoutes);

  app.notFound(notFound);
  app.onError(onError);
  return app;
}
