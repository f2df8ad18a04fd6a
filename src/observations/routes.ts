import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { liveTarget } from "./live-target.ts";
import { IngestionResult, observationsBody } from "./schema.ts";
import { ingestObservations } from "./service.ts";

const ingestObservationsRoute = createRoute(
  operation({
    method: "post",
    path: "/",
    operationId: "ingestObservations",
    tags: ["Admin"],
    summary: "Ingest price observations",
    description:
      "At most 1,000 a call, all or nothing. Upserts products by `sku` and offers by (product, competitor), appends history when price " +
      "or stock changes and emits one event per change to the webhooks. Replaying an observation changes nothing.",
    credential: "admin",
    scope: "prices:write",
    request: { query: noQuery, body: jsonBody(observationsBody, "The observations") },
    responses: { 200: jsonResponse("What the observations changed", IngestionResult) },
  }),
);

/**
 * POST /admin/observations (scope prices:write): all or nothing, see src/observations/service.ts. Its committed events
 * go on to the open streams and the webhooks' first delivery in the request's one after-commit step (src/pipeline/after-commit.ts).
 */
export const observationRoutes = openApiApp().openapi(ingestObservationsRoute, async (c) =>
  c.json(
    await ingestObservations(liveTarget(c.var.services), {
      observations: c.req.valid("json").observations,
      afterCommit: c.var.services.afterCommit,
    }),
    200,
  ),
);
