import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { listWebhookDeliveries } from "../delivery-log.ts";
import { DeliveryList, webhookIdParam } from "../schema.ts";
import { common } from "./common.ts";

const listWebhookDeliveriesRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}/deliveries",
    operationId: "listWebhookDeliveries",
    summary: "The webhook's latest 100 delivery attempts",
    request: { params: webhookIdParam, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The attempts, newest first", DeliveryList) },
  }),
);

export const registerListWebhookDeliveries = (app: OpenApiApp) =>
  app.openapi(listWebhookDeliveriesRoute, async (c) =>
    c.json(await listWebhookDeliveries(c.var.services, { accountId: c.var.account.id, id: c.req.valid("param").id }), 200),
  );
