import type { OpenAPIHono } from "@hono/zod-openapi";
import { type Context, Hono } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { hashedAssets, page } from "../http/assets.ts";
import { initScript, pageStyles, swaggerScript, swaggerStyles, docsAssetVersion as version } from "./assets.gen.js";
import { openApiDocument } from "./document.ts";

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

/**
 * GET /docs: the interactive reference (Swagger UI, from swagger-ui-dist, served by this worker like
 * the dashboard's assets, so nothing loads from another origin) for GET /openapi.json.
 */
export const docsRoutes = new Hono<AppEnv>()
  .get("/", (c) => page(c, PAGE))
  .get(
    "/assets/:file",
    hashedAssets({
      [`swagger-ui-${version}.js`]: swaggerScript,
      [`swagger-ui-${version}.css`]: swaggerStyles,
      [`init-${version}.js`]: initScript,
      [`docs-${version}.css`]: pageStyles,
    }),
  );

/** GET /openapi.json: generated from the app's routes on first request, then kept. */
export function openApiRoute(app: OpenAPIHono<AppEnv>) {
  let document: string | undefined;
  return (c: Context<AppEnv>) => {
    document ??= JSON.stringify(openApiDocument(app));
    return c.body(document, 200, { "Content-Type": "application/json", "Cache-Control": "public, max-age=300" });
  };
}
