import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { docsAssetVersion as version, initScript, pageStyles, swaggerScript, swaggerStyles } from "../docs/assets.gen.js";
import { notFound } from "../errors.ts";

/**
 * GET /docs: the interactive reference (Swagger UI, from the npm registry's swagger-ui-dist, served
 * by this worker like the dashboard's assets) for GET /openapi.json. Nothing is loaded from another
 * origin, so the policy allows 'self' only (and data: images, which Swagger UI's styles use for icons).
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join("; ");

const assets = new Map([
  [`swagger-ui-${version}.js`, { body: swaggerScript, type: "text/javascript; charset=utf-8" }],
  [`swagger-ui-${version}.css`, { body: swaggerStyles, type: "text/css; charset=utf-8" }],
  [`init-${version}.js`, { body: initScript, type: "text/javascript; charset=utf-8" }],
  [`docs-${version}.css`, { body: pageStyles, type: "text/css; charset=utf-8" }],
]);

const asset = (name: string) => `/docs/assets/${name}-${version}`;
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Price Data API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${asset("swagger-ui")}.css">
<link rel="stylesheet" href="${asset("docs")}.css">
</head>
<body>
<noscript><p>The reference needs JavaScript; the description itself is at <a href="/openapi.json">/openapi.json</a>.</p></noscript>
<div id="swagger-ui"></div>
<script src="${asset("swagger-ui")}.js"></script>
<script src="${asset("init")}.js"></script>
</body>
</html>
`;

/** Mounted at "/", behind the admission middleware like every route (so it carries the rate-limit headers). */
export const docsRoutes = new Hono<AppEnv>()
  .get("/docs", (c) =>
    c.html(PAGE, 200, { "Content-Security-Policy": CSP, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer" }),
  )
  .get("/docs/assets/:file", (c) => {
    const found = assets.get(c.req.param("file"));
    if (!found) return notFound(c);
    return c.body(found.body, 200, { "Content-Type": found.type, "Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff" });
  });
