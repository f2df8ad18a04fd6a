import { type Context, Hono } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { hashedAssets, page } from "../http/assets.ts";
import { ApiError } from "../http/errors.ts";
import { assetVersion, clientScript, clientStyles } from "./assets.gen.js";
import { idpConnectOrigins } from "./idp-origins.ts";
import { dashboardPage } from "./page.ts";

/** The page, for /dashboard, /dashboard/ (the IdP's post-logout target) and /dashboard/callback (its redirect target). */
export async function serveDashboard(c: Context<AppEnv>) {
  const clientId = c.env.DASHBOARD_CLIENT_ID?.trim();
  if (!clientId) {
    throw new ApiError(
      500,
      "Server misconfigured: the DASHBOARD_CLIENT_ID variable is not set, so the dashboard cannot sign anyone in; " +
        "set it to the identity provider's public client id.",
    );
  }
  const { IDP_ISSUER: issuer, IDP_AUDIENCE: audience } = c.var.services.config;
  if (!URL.canParse(issuer)) throw new ApiError(500, "Server misconfigured: IDP_ISSUER is not a URL.");
  // fetch() may reach this API and the IdP: its discovery document and its token endpoint, wherever that is.
  const connect = await idpConnectOrigins(issuer);
  return page(c, dashboardPage({ issuer, clientId, audience, assetVersion }), { connect, cache: "no-store" });
}

/** Mounted at /dashboard (a sub-app's "/" is /dashboard without the slash: src/app.ts adds /dashboard/). */
export const dashboardRoutes = new Hono<AppEnv>()
  .get("/", serveDashboard)
  .get("/callback", serveDashboard)
  .get("/assets/:file", hashedAssets({ [`app-${assetVersion}.js`]: clientScript, [`app-${assetVersion}.css`]: clientStyles }));
