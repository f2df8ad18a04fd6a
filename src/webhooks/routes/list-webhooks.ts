import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { WebhookList } from "../schema.ts";
import { listWebhooks } from "../service.ts";
import { common } from "./common.ts";

const listWebhooksRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/",
    operationId: "listWebhooks",
    summary: "List the account's webhooks",
    request: { query: noQuery },
    responses: { 200: jsonResponse("The webhooks, newest first", WebhookList) },
  }),
);

export const registerListWebhooks = (app: OpenApiApp) =>
  app.openapi(listWebhooksRoute, async (c) => c.json(await listWebhooks(c.var.services.db, c.var.account.id), 200));
