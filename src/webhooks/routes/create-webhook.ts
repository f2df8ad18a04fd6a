import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { CreatedWebhook, webhookBody } from "../schema.ts";
import { createWebhook, MAX_TEST_WEBHOOKS_PER_ACCOUNT, MAX_WEBHOOKS_PER_ACCOUNT } from "../service.ts";
import { common } from "./common.ts";

const createWebhookRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/",
    operationId: "createWebhook",
    summary: "Register a webhook",
    description:
      "The URL must be https:// and name a public host. The signing secret is in this response only. At most " +
      `${MAX_WEBHOOKS_PER_ACCOUNT} webhooks per account (then 409), of which at most ${MAX_TEST_WEBHOOKS_PER_ACCOUNT} test webhooks ` +
      "(environment test; then 400, naming the limit). Deliveries follow Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature) and are retried for about a " +
      "day; a 410 disables the webhook.",
    request: {
      query: noQuery,
      body: jsonBody(webhookBody, "The endpoint, and optionally which events, a minimum price change and a description"),
    },
    errors: { conflict: true },
    responses: { 201: jsonResponse("The webhook, with its signing secret", CreatedWebhook, ["Cache-Control"]) },
  }),
);

export const registerCreateWebhook = (app: OpenApiApp) =>
  app.openapi(createWebhookRoute, async (c) => {
    const created = await createWebhook(c.var.services, { accountId: c.var.account.id, body: c.req.valid("json") });
    return c.json(created, 201, { "Cache-Control": "no-store" });
  });
