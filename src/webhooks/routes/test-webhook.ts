import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { TestEventQueued, webhookIdParam } from "../schema.ts";
import { testWebhook } from "../service.ts";
import { common } from "./common.ts";

const testWebhookRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/{id}/test",
    operationId: "testWebhook",
    summary: "Send a webhook.test event to this webhook",
    description: "Queued at once; the delivery shows in its deliveries. 409 when the webhook is disabled.",
    request: { params: webhookIdParam, query: noQuery },
    errors: { notFound: true, conflict: true },
    responses: { 202: jsonResponse("The test event is queued", TestEventQueued) },
  }),
);

export const registerTestWebhook = (app: OpenApiApp) =>
  app.openapi(testWebhookRoute, async (c) =>
    c.json(await testWebhook(c.var.services, { accountId: c.var.account.id, id: c.req.valid("param").id }), 202),
  );
