import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { Competitor, competitorIdParam, competitorPatchBody } from "../schema.ts";
import { updateCompetitor } from "../service.ts";

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

export const registerUpdateCompetitor = (app: OpenApiApp) =>
  app.openapi(updateCompetitorRoute, async (c) =>
    c.json(await updateCompetitor(c.var.services, { id: c.req.valid("param").id, patch: c.req.valid("json") }), 200),
  );
