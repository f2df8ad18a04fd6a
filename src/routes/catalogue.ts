import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { requireApiKey } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { competitorsJson, loadCatalogue, productHistory, productJson, productsBody, productsEtag } from "../services/catalogue.ts";
import { historyQuery, noQuery, productsQuery } from "./catalogue-queries.ts";
import { conditionalJson } from "./conditional.ts";
import { emptyResponse, jsonResponse, openApiApp, operation, serve } from "./openapi.ts";
import { CompetitorList, History, Product, ProductList } from "./responses.ts";

export type { CompetitorView, HistoryView, OfferView, ProductView, SummaryView } from "../services/catalogue.ts";

const productId = z.object({ id: z.string().meta({ description: "The product's id (`prd_…`)", example: "prd_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }) });
const ifNoneMatch = z.object({
  "If-None-Match": z.string().optional().meta({ description: "The ETag of a response you hold: 304 while the catalogue is unchanged" }),
});
const notModified = emptyResponse("Not modified: the catalogue is unchanged since the ETag sent", ["ETag", "Cache-Control"]);
/** requireApiKey per route, not with `use`: this app is mounted at "/", where a `use` would reach every other route too. */
const common = { tags: ["Catalogue"], credential: "api-key" as const, middleware: [requireApiKey] };

const listProducts = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/products",
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
    path: "/products/{id}",
    operationId: "getProduct",
    summary: "One product",
    request: { params: productId, query: noQuery, headers: ifNoneMatch },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The product", Product, ["ETag", "Cache-Control"]), 304: notModified },
  }),
);

const getHistory = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/products/{id}/history",
    operationId: "getProductHistory",
    summary: "A product's price and stock history",
    description: "Oldest first; `from` inclusive, `to` exclusive; at most 1,000 rows: when cut, X-Result-Truncated is true, and the next page starts `from` the last `observed_at`.",
    request: { params: productId, query: historyQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The history", History, ["X-Result-Truncated"]) },
  }),
);

const listCompetitors = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/competitors",
    operationId: "listCompetitors",
    summary: "Competitors, with their offer counts",
    request: { query: noQuery, headers: ifNoneMatch },
    responses: { 200: jsonResponse("The competitors", CompetitorList, ["ETag", "Cache-Control"]), 304: notModified },
  }),
);

/** The data routes (API key). No CORS headers, on purpose (contract). */
export const catalogueRoutes = openApiApp();
serve(catalogueRoutes, listProducts, async (c) => {
  const filters = c.req.valid("query");
  const catalogue = await loadCatalogue(database(c.env.DB, c.var.work));
  return conditionalJson(c, await productsEtag(catalogue, filters), () => productsBody(catalogue, filters));
});
serve(catalogueRoutes, getProduct, async (c) => {
  const catalogue = await loadCatalogue(database(c.env.DB, c.var.work));
  const json = productJson(catalogue, c.req.valid("param").id);
  return conditionalJson(c, catalogue.etag, () => json);
});
serve(catalogueRoutes, getHistory, async (c) => {
  const { truncated, ...page } = await productHistory(database(c.env.DB, c.var.work), c.req.valid("param").id, c.req.valid("query"));
  if (truncated) c.header("X-Result-Truncated", "true");
  return c.json(page, 200);
});
serve(catalogueRoutes, listCompetitors, async (c) => {
  const catalogue = await loadCatalogue(database(c.env.DB, c.var.work));
  return conditionalJson(c, catalogue.etag, () => competitorsJson(catalogue));
});
