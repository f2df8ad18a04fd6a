import { createRoute } from "@hono/zod-openapi";
import type { Context } from "hono";
import { accepts } from "hono/accepts";
import type { AppEnv } from "../../http/app-env.ts";
import { CACHE_CONTROL, ifNoneMatchHits } from "../../http/conditional.ts";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { ref } from "../../http/openapi-components.ts";
import { operation, type RouteBudget } from "../../operation/operation.ts";
import { ifNoneMatch, Product, ProductList, productsQuery } from "../schema.ts";
import { conversionOf, selectsProducts } from "../service.ts";
import { common, notModified, TEST_KEY_READS } from "./common.ts";

const JSON_TYPE = "application/json";
const NDJSON = "application/x-ndjson";
const productsOk = jsonResponse('The products: `{"products":[…]}` as JSON, or one product per line as NDJSON', ProductList, [
  "ETag",
  "Cache-Control",
]);
/** The NDJSON form's schema is that of one line: a reference to Product, with its own description. */
const ProductLine = Product.openapi({ description: "One line of the NDJSON body: one product (JSON, then a newline), in id order" });
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

export const registerListProducts = (app: OpenApiApp) =>
  app.openapi(listProductsRoute, async (c) => {
    const filters = c.req.valid("query");
    const form = requestedForm(c);
    const gzip = acceptsGzip(clientAcceptEncoding(c));
    const conversion = await conversionOf(c.var.services, filters.currency);
    const { etag, body } = await c.var.keyData.productList({ filters, form, gzip, conversion });
    return streamed(c, etag, form === "ndjson" ? NDJSON : JSON_TYPE, gzip, body);
  });
