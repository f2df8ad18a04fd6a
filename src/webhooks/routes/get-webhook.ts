import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { Webhook, webhookIdParam } from "../schema.ts";
import { getWebhook } from "../service.ts";
import { common } from "./common.ts";

const getWebhookRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}",
    operationId: "getWebhook",
    summary: "One webhook",
    request: { params: webhookIdParam, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The webhook (never its secret)", Webhook) },
  }),
);

export const registerGetWebhook = (app: OpenApiApp) =>
  app.openapi(getWebhookRoute, async (c) =>
    c.json(await getWebhook(c.var.services.db, { accountId: c.var.account.id, id: c.req.valid("param").id }), 200),
  );
