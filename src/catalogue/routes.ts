import { createRoute } from "@hono/zod-openapi";
import { requireApiKey } from "../auth/guards.ts";
import { conditionalJson } from "../http/conditional.ts";
import { emptyResponse, jsonResponse, openApiApp, operation } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { productHistory } from "./history.ts";
import { CompetitorList, History, historyQuery, ifNoneMatch, Product, productIdParam, ProductList, productsQuery } from "./schema.ts";
import { competitorsJson, loadCatalogue, productJson, productsBody, productsEtag } from "./service.ts";

const notModified = emptyResponse("Not modified: the catalogue is unchanged since the ETag sent", ["ETag", "Cache-Control"]);
const common = { tags: ["Catalogue"], credential: "api-key" as const, middleware: [requireApiKey] };

const listProducts = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/",
    operationId: "listProducts",
    summary: "All products, in one call",
    description:
      "Filters select whole products: `sku` and `competitor` exactly, `brand` and `category` case-insensitively, `updated_since` inclusive. " +
      "An unknown parameter is a 400. Served from a per-isolate copy: up to 1 s behind an ingestion elsewhere.",
    request: { query: productsQuery, headers: ifNoneMatch },
    responses: { 200: jsonResponse("The products", ProductList, ["ETag", "Cache-Control"]), 304: notModified },
  }),
);

const getProduct = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}",
    operationId: "getProduct",
    summary: "One product",
    request: { params: productIdParam, query: noQuery, headers: ifNoneMatch },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The product", Product, ["ETag", "Cache-Control"]), 304: notModified },
  }),
);

const getHistory = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}/history",
    operationId: "getProductHistory",
    summary: "A product's price and stock history",
    description: "Oldest first; `from` inclusive, `to` exclusive; at most 1,000 rows: when cut, X-Result-Truncated is true, and the next page starts `from` the last `observed_at`.",
    request: { params: productIdParam, query: historyQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The history", History, ["X-Result-Truncated"]) },
  }),
);

const listCompetitors = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/",
    operationId: "listCompetitors",
    summary: "Competitors, with their offer counts",
    request: { query: noQuery, headers: ifNoneMatch },
    responses: { 200: jsonResponse("The competitors", CompetitorList, ["ETag", "Cache-Control"]), 304: notModified },
  }),
);

/** GET /products… (API key). No CORS headers, on purpose (contract). */
export const productRoutes = openApiApp()
  .openapi(listProducts, async (c) => {
    const filters = c.req.valid("query");
    const catalogue = await loadCatalogue(c.var.ctx.db);
    return conditionalJson(c, await productsEtag(catalogue, filters), () => productsBody(catalogue, filters));
  })
  .openapi(getProduct, async (c) => {
    const catalogue = await loadCatalogue(c.var.ctx.db);
    const json = productJson(catalogue, c.req.valid("param").id);
    return conditionalJson(c, catalogue.etag, () => json);
  })
  .openapi(getHistory, async (c) => {
    const { truncated, ...page } = await productHistory(c.var.ctx.db, c.req.valid("param").id, c.req.valid("query"));
    if (truncated) c.header("X-Result-Truncated", "true");
    return c.json(page, 200);
  });

/** GET /competitors (API key). */
export const competitorRoutes = openApiApp().openapi(listCompetitors, async (c) => {
  const catalogue = await loadCatalogue(c.var.ctx.db);
  return conditionalJson(c, catalogue.etag, () => competitorsJson(catalogue));
});
