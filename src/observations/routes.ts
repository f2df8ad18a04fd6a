import { createRoute } from "@hono/zod-openapi";
import type { EventMessage } from "../events/messages.ts";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { publishToStreams } from "../stream/publish.ts";
import { deliverAfterCommit } from "../webhooks/delivery/immediate.ts";
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
 * reach the open streams (their hubs) and the webhooks (their first delivery) from here, in one step after the answer.
 */
export const observationRoutes = openApiApp().openapi(ingestObservationsRoute, async (c) => {
  const { db, archive, queue } = c.var.services;
  const afterCommit = (events: readonly EventMessage[]) =>
    c.var.services.afterAnswer(
      Promise.all([
        publishToStreams(c.env, events, c.var.services.work),
        deliverAfterCommit({ db, archive, queue, endpoints: c.env.WEBHOOK_ENDPOINT }, events),
      ]),
    );
  return c.json(await ingestObservations(c.var.services, { observations: c.req.valid("json").observations, afterCommit }), 200);
});
