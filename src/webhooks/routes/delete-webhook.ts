import { createRoute } from "@hono/zod-openapi";
import { emptyResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { webhookIdParam } from "../schema.ts";
import { deleteWebhook } from "../service.ts";
import { common } from "./common.ts";

const deleteWebhookRoute = createRoute(
  operation({
    ...common,
    method: "delete",
    path: "/{id}",
    operationId: "deleteWebhook",
    summary: "Delete a webhook and its delivery records",
    request: { params: webhookIdParam, query: noQuery },
    errors: { notFound: true },
    responses: { 204: emptyResponse("Deleted") },
  }),
);

export const registerDeleteWebhook = (app: OpenApiApp) =>
  app.openapi(deleteWebhookRoute, async (c) => {
    await deleteWebhook(c.var.services.db, { accountId: c.var.account.id, id: c.req.valid("param").id });
    return c.body(null, 204);
  });
