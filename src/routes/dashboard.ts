import { Hono, type Context } from "hono";
import type { AppEnv } from "../app-env.ts";
import { assetVersion, clientScript, clientStyles } from "../dashboard/assets.gen.js";
import { dashboardPage } from "../dashboard/page.ts";
import { ApiError, notFound } from "../errors.ts";

/** The page, for /dashboard, /dashboard/ and /dashboard/callback (the IdP's redirect target). */
function page(c: Context<AppEnv>) {
  const clientId = c.env.DASHBOARD_CLIENT_ID?.trim();
  if (!clientId) {
    throw new ApiError(500, "Server misconfigured: the DASHBOARD_CLIENT_ID variable is not set, so the dashboard cannot sign anyone in; set it to the identity provider's public client id.");
  }
  const { IDP_ISSUER: issuer, IDP_AUDIENCE: audience } = c.var.config;
  let idpOrigin: string;
  try {
    idpOrigin = new URL(issuer).origin;
  } catch {
    throw new ApiError(500, "Server misconfigured: IDP_ISSUER is not a URL.");
  }
  // The page's own script and styles only; fetch() may reach this API and the IdP (discovery, token).
  const csp = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src 'self' ${idpOrigin}`,
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return c.html(dashboardPage({ issuer, clientId, audience, assetVersion }), 200, {
    "Content-Security-Policy": csp,
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
  });
}

// Named by their content hash, so a browser may keep them for good.
const assets = new Map([
  [`app-${assetVersion}.js`, { body: clientScript, type: "text/javascript; charset=utf-8" }],
  [`app-${assetVersion}.css`, { body: clientStyles, type: "text/css; charset=utf-8" }],
]);

/** Mounted at "/": both /dashboard and /dashboard/ (the IdP's post-logout target) serve the page. */
export const dashboardRoutes = new Hono<AppEnv>()
  .get("/dashboard", page)
  .get("/dashboard/", page)
  .get("/dashboard/callback", page)
  .get("/dashboard/assets/:file", (c) => {
    const asset = assets.get(c.req.param("file"));
    if (!asset) return notFound(c);
    return c.body(asset.body, 200, {
      "Content-Type": asset.type,
      "Cache-Control": "public, max-age=31536000, immutable",
      "X-Content-Type-Options": "nosniff",
    });
  });
