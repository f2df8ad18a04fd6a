import { createRoute } from "@hono/zod-openapi";
import type { Context } from "hono";
import { accepts } from "hono/accepts";
import type { AppEnv } from "../http/app-env.ts";
import { CACHE_CONTROL, conditionalJson, ifNoneMatchHits } from "../http/conditional.ts";
import { emptyResponse, jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { ref } from "../http/openapi-components.ts";
import { noQuery } from "../http/query.ts";
import { operation, type RouteBudget } from "../operation/operation.ts";
import {
  Competitor,
  CompetitorList,
  competitorIdParam,
  competitorPatchBody,
  History,
  historyQuery,
  ifNoneMatch,
  Product,
  ProductList,
  productIdParam,
  productQuery,
  productsQuery,
} from "./schema.ts";
import { contentEtag, conversionOf, selectsProducts, updateCompetitor } from "./service.ts";

const notModified = emptyResponse("Not modified: the catalogue is unchanged since the ETag sent", ["ETag", "Cache-Control"]);
const JSON_TYPE = "application/json";
const encoder = new TextEncoder();
const NDJSON = "application/x-ndjson";
const productsOk = jsonResponse('The products: `{"products":[…]}` as JSON, or one product per line as NDJSON', ProductList, [
  "ETag",
  "Cache-Control",
]);
/** The NDJSON form's schema is that of one line: a reference to Product, with its own description. */
const ProductLine = Product.openapi({ description: "One line of the NDJSON body: one product (JSON, then a newline), in id order" });
const common = { tags: ["Catalogue"], credential: "api-key" as const, scope: "products:read" as const };
/** What a test key reads instead (src/sandbox/), said on each catalogue read. */
const TEST_KEY_READS =
  "A test key (`pda_test_…`) reads its account's sandbox instead: 1,000 synthetic products (`TEST-…` SKUs) and the " +
  "account's own changes (POST /test/observations), never the catalogue; a live key never reads a sandbox.";

/**
 * The whole list the stored gzip does not answer as it is: no filter, and `currency` (every offer converted) or no
 * gzip (the list inflated as it streams): seconds of CPU a read at a million products, so at most 60 an hour per key
 * (contract, fifth wave). Decided at admission from the query as sent, before it is validated.
 */
const wholeListBudget: RouteBudget = {
  name: "whole-list",
  quota: 60,
  windowSeconds: 3600,
  covers: "reads of the whole list, unfiltered, with currency or without Accept-Encoding: gzip",
  counts: (c) => {
    const query = c.req.query();
    return !selectsProducts(query) && (query.currency !== undefined || !acceptsGzip(clientAcceptEncoding(c)));
  },
};

const listProductsRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/",
    operationId: "listProducts",
    budget: wholeListBudget,
    summary: "All products, in one call",
    description:
      "Filters select whole products: `sku` and `competitor` exactly, `brand` and `category` case-insensitively, `updated_since` inclusive. " +
      "An unknown parameter is a 400. Streamed from the catalogue snapshot, a few seconds behind an ingestion at most: " +
      "`Accept-Encoding: gzip` gets the stored gzip bytes, `Accept: application/x-ndjson` one product per line. " +
      "`updated_since` with the time of your last sync gives only what changed since. `currency` converts every offer " +
      "(`converted`) and the summaries: a read of the snapshot like a filtered one, costlier than the stored bytes. " +
      TEST_KEY_READS,
    request: { query: productsQuery, headers: ifNoneMatch },
    responses: {
      200: { ...productsOk, content: { ...productsOk.content, [NDJSON]: { schema: ProductLine } } },
      304: notModified,
      503: ref("CatalogueBuilding"),
    },
  }),
);

const getProductRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}",
    operationId: "getProduct",
    summary: "One product",
    description: `\`currency\` converts each offer (\`converted\`) and the summary. ${TEST_KEY_READS}`,
    request: { params: productIdParam, query: productQuery, headers: ifNoneMatch },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The product", Product, ["ETag", "Cache-Control"]), 304: notModified },
  }),
);

const getProductHistoryRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}/history",
    operationId: "getProductHistory",
    scope: "history:read",
    summary: "A product's price and stock history",
    description:
      "Oldest first; `from` inclusive, `to` exclusive; at most 1,000 rows: when cut, X-Result-Truncated is true, and the next page starts `from` the last `observed_at`. " +
      TEST_KEY_READS,
    request: { params: productIdParam, query: historyQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The history", History, ["X-Result-Truncated"]) },
  }),
);

const listCompetitorsRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/",
    operationId: "listCompetitors",
    summary: "Competitors, with their offer counts",
    description: TEST_KEY_READS,
    request: { query: noQuery, headers: ifNoneMatch },
    responses: {
      200: jsonResponse("The competitors", CompetitorList, ["ETag", "Cache-Control"]),
      304: notModified,
      503: ref("CatalogueBuilding"),
    },
  }),
);

/**
 * The Accept-Encoding the client sent. Cloudflare's edge (and `wrangler dev`, which mimics it) hands the
 * worker its own `Accept-Encoding` and keeps the client's in `request.cf.clientAcceptEncoding` ("" when
 * the client sent none): negotiate on that one, so a client that did not ask for gzip is not sent it.
 */
const clientAcceptEncoding = (c: Context): string | undefined => {
  const original = (c.req.raw.cf as IncomingRequestCfProperties | undefined)?.clientAcceptEncoding;
  return typeof original === "string" ? original : c.req.header("Accept-Encoding");
};

/** The client takes gzip: a coding "gzip" (or "*") not refused with q=0 (RFC 9110 §12.5.3). */
function acceptsGzip(header: string | undefined): boolean {
  return (header ?? "").split(",").some((item) => {
    const [coding, ...params] = item.split(";").map((part) => part.trim().toLowerCase());
    return (coding === "gzip" || coding === "*") && !params.some((param) => /^q=0(\.0*)?$/.test(param));
  });
}

/**
 * A streamed 200 with its ETag, or 304. Stored gzip bytes pass through as they are ("manual"), never re-encoded. The
 * body reads as it streams, so the request's tally carries it (its X-Work-Counts says final=0).
 */
function streamed(c: Context<AppEnv>, etag: string, contentType: string, gzip: boolean, body: () => ReadableStream<Uint8Array>): Response {
  const headers = { ETag: etag, "Cache-Control": CACHE_CONTROL, Vary: "Accept, Accept-Encoding" };
  if (ifNoneMatchHits(c.req.header("If-None-Match"), etag)) return c.body(null, 304, headers);
  const res = c.body(c.var.services.work.carry(body()), 200, {
    ...headers,
    "Content-Type": contentType,
    ...(gzip ? { "Content-Encoding": "gzip" } : {}),
  });
  return gzip ? new Response(res.body, { status: 200, headers: res.headers, encodeBody: "manual" }) : res;
}

/**
 * Which form the client asked for, by RFC 9110 content negotiation (q-values, wildcards): JSON unless
 * NDJSON is preferred. The OpenAPI document states the choice as the 200's two media types, as OpenAPI
 * has it (an `Accept` header parameter "SHALL be ignored" by its tools).
 */
const requestedForm = (c: Context) =>
  accepts(c, { header: "Accept", supports: [JSON_TYPE, NDJSON], default: JSON_TYPE }) === NDJSON ? "ndjson" : "json";

/** GET /products… (API key). No CORS headers, on purpose (contract). */
export const productRoutes = openApiApp()
  .openapi(listProductsRoute, async (c) => {
    const filters = c.req.valid("query");
    const form = requestedForm(c);
    const gzip = acceptsGzip(clientAcceptEncoding(c));
    const conversion = await conversionOf(c.var.services, filters.currency);
    const { etag, body } = await c.var.keyData.productList({ filters, form, gzip, conversion });
    return streamed(c, etag, form === "ndjson" ? NDJSON : JSON_TYPE, gzip, body);
  })
  .openapi(getProductRoute, async (c) => {
    const { id } = c.req.valid("param");
    const conversion = await conversionOf(c.var.services, c.req.valid("query").currency);
    const json = encoder.encode(await c.var.keyData.productJson(id, conversion)) as Uint8Array<ArrayBuffer>;
    return conditionalJson(c, await contentEtag(json), () => json);
  })
  .openapi(getProductHistoryRoute, async (c) => {
    const [{ id }, query] = [c.req.valid("param"), c.req.valid("query")];
    const { truncated, ...page } = await c.var.keyData.history(id, query);
    if (truncated) c.header("X-Result-Truncated", "true");
    return c.json(page, 200);
  });

/** GET /competitors (API key): from the snapshot's manifest, no offer is read (a test key: its sandbox's shops). */
export const competitorRoutes = openApiApp().openapi(listCompetitorsRoute, async (c) => {
  const { etag, json } = await c.var.keyData.competitors();
  return conditionalJson(c, etag, json);
});

const updateCompetitorRoute = createRoute(
  operation({
    method: "patch",
    path: "/{id}",
    operationId: "updateCompetitor",
    tags: ["Admin"],
    summary: "Rename a competitor, or change its domain",
    description:
      "Observations never rename a stored competitor; this does. Any of name and domain; at least one. Values the competitor already has " +
      "change nothing. A change shows in every offer's `competitor_name` once the catalogue snapshot is rebuilt (one full build). " +
      "`offer_count` is the competitor's count in the snapshot being served, as GET /competitors gives it.",
    credential: "admin",
    scope: "prices:write",
    request: { params: competitorIdParam, query: noQuery, body: jsonBody(competitorPatchBody, "The fields to change") },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The competitor as it now is", Competitor) },
  }),
);

/** PATCH /admin/competitors/:id (admin, scope prices:write). */
export const adminCompetitorRoutes = openApiApp().openapi(updateCompetitorRoute, async (c) =>
  c.json(await updateCompetitor(c.var.services, { id: c.req.valid("param").id, patch: c.req.valid("json") }), 200),
);
