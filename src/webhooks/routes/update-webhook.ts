import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { Webhook, webhookIdParam, webhookPatchBody } from "../schema.ts";
import { updateWebhook } from "../service.ts";
import { common } from "./common.ts";

const updateWebhookRoute = createRoute(
  operation({
    ...common,
    method: "patch",
    path: "/{id}",
    operationId: "updateWebhook",
    summary: "Edit a webhook, or disable or enable it",
    description:
      "Any of url, events, min_change_pct, description and status; at least one. Enabling clears disabled_reason. The secret does not " +
      "change. An MCP events subscription (source mcp) may change only description and status: its url, events, min_change_pct " +
      "and filters make its id (400).",
    request: { params: webhookIdParam, query: noQuery, body: jsonBody(webhookPatchBody, "The fields to change") },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The webhook as it now is", Webhook) },
  }),
);

export const registerUpdateWebhook = (app: OpenApiApp) =>
  app.openapi(updateWebhookRoute, async (c) => {
    const webhook = { accountId: c.var.account.id, id: c.req.valid("param").id };
    return c.json(await updateWebhook(c.var.services, { ...webhook, patch: c.req.valid("json") }), 200);
  });
