import { createRoute } from "@hono/zod-openapi";
import { conditionalJson } from "../../http/conditional.ts";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { operation } from "../../operation/operation.ts";
import { ifNoneMatch, Product, productIdParam, productQuery } from "../schema.ts";
import { contentEtag, conversionOf } from "../service.ts";
import { common, notModified, TEST_KEY_READS } from "./common.ts";

const encoder = new TextEncoder();

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

export const registerGetProduct = (app: OpenApiApp) =>
  app.openapi(getProductRoute, async (c) => {
    const { id } = c.req.valid("param");
    const conversion = await conversionOf(c.var.services, c.req.valid("query").currency);
    const json = encoder.encode(await c.var.keyData.productJson(id, conversion)) as Uint8Array<ArrayBuffer>;
    return conditionalJson(c, await contentEtag(json), () => json);
  });
