import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { operation } from "../../operation/operation.ts";
import { History, historyQuery, productIdParam } from "../schema.ts";
import { common, TEST_KEY_READS } from "./common.ts";

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

export const registerGetProductHistory = (app: OpenApiApp) =>
  app.openapi(getProductHistoryRoute, async (c) => {
    const [{ id }, query] = [c.req.valid("param"), c.req.valid("query")];
    const { truncated, ...page } = await c.var.keyData.history(id, query);
    if (truncated) c.header("X-Result-Truncated", "true");
    return c.json(page, 200);
  });
