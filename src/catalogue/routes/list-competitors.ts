import { createRoute } from "@hono/zod-openapi";
import { conditionalJson } from "../../http/conditional.ts";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { ref } from "../../http/openapi-components.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { CompetitorList, ifNoneMatch } from "../schema.ts";
import { common, notModified, TEST_KEY_READS } from "./common.ts";

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

export const registerListCompetitors = (app: OpenApiApp) =>
  app.openapi(listCompetitorsRoute, async (c) => {
    const { etag, json } = await c.var.keyData.competitors();
    return conditionalJson(c, etag, json);
  });
