import { createRoute } from "@hono/zod-openapi";
import { emptyResponse, jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { budgetLabel } from "../rate-limit/account-budgets.ts";
import { accountBudgets } from "../rate-limit/stub.ts";
import { listWebhookDeliveries } from "./delivery-log.ts";
import { replayWebhookEvents } from "./replay.ts";
import { rotateWebhookSecret } from "./rotation.ts";
import {
  CreatedWebhook,
  DeliveryList,
  MAX_REPLAY_EVENTS,
  ReplayQueued,
  replayBody,
  rotateSecretBody,
  TestEventQueued,
  Webhook,
  WebhookList,
  webhookBody,
  webhookIdParam,
  webhookPatchBody,
} from "./schema.ts";
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listWebhooks,
  MAX_TEST_WEBHOOKS_PER_ACCOUNT,
  MAX_WEBHOOKS_PER_ACCOUNT,
  testWebhook,
  updateWebhook,
} from "./service.ts";

const common = { tags: ["Webhooks"], credential: "account" as const };

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

const rotateWebhookSecretRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/{id}/rotate-secret",
    operationId: "rotateWebhookSecret",
    summary: "Replace the signing secret",
    description:
      "The new secret is in this response only. During the grace (grace_seconds, default 86400, at most 604800) each delivery carries " +
      "two signatures in webhook-signature, new then old (`v1,<new> v1,<old>`), so receivers can switch secrets without missing one. " +
      "Concurrent calls take effect one after another: a call that lost the race answers 409 and changes nothing. An MCP events " +
      "subscription (source mcp) answers 409: its secret is its client's, replaced when the client subscribes again with a new one.",
    request: {
      params: webhookIdParam,
      query: noQuery,
      body: jsonBody(rotateSecretBody, "The grace during which the previous secret still signs"),
    },
    errors: { notFound: true, conflict: true },
    responses: { 200: jsonResponse("The webhook, with its new signing secret", CreatedWebhook, ["Cache-Control"]) },
  }),
);

const replayWebhookEventsRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/{id}/replay",
    operationId: "replayWebhookEvents",
    summary: "Send stored events to this webhook again",
    description:
      "The events of [since, until) within the last 30 days that this webhook takes (its events and min_change_pct), to this webhook " +
      "only, with their original ids (webhook-id). only_failed: just those it has not received. At most " +
      `${MAX_REPLAY_EVENTS.toLocaleString("en")} a call (more is a 400: replay a shorter span). They count in the account's ` +
      `${budgetLabel("replayed-deliveries")}, over all its webhooks: the oldest go first, the rest are held back (held_back, ` +
      "refills_at) and stay in the feed for a later replay. 409 when the webhook is disabled; 503 when the queue did not take them " +
      "all (send the request again).",
    request: { params: webhookIdParam, query: noQuery, body: jsonBody(replayBody, "Which events to send again") },
    errors: { notFound: true, conflict: true },
    responses: { 202: jsonResponse("The events are queued", ReplayQueued) },
  }),
);

/** /webhooks (account login). Webhook ids of another account are 404, as if they did not exist. */

export const webhookRoutes = openApiApp()
  .openapi(createWebhookRoute, async (c) => {
    const created = await createWebhook(c.var.services, { accountId: c.var.account.id, body: c.req.valid("json") });
    return c.json(created, 201, { "Cache-Control": "no-store" });
  })
  .openapi(listWebhooksRoute, async (c) => c.json(await listWebhooks(c.var.services.db, c.var.account.id), 200))
  .openapi(getWebhookRoute, async (c) =>
    c.json(await getWebhook(c.var.services.db, { accountId: c.var.account.id, id: c.req.valid("param").id }), 200),
  )
  .openapi(deleteWebhookRoute, async (c) => {
    await deleteWebhook(c.var.services.db, { accountId: c.var.account.id, id: c.req.valid("param").id });
    return c.body(null, 204);
  })
  .openapi(testWebhookRoute, async (c) =>
    c.json(await testWebhook(c.var.services, { accountId: c.var.account.id, id: c.req.valid("param").id }), 202),
  )
  .openapi(updateWebhookRoute, async (c) => {
    const webhook = { accountId: c.var.account.id, id: c.req.valid("param").id };
    return c.json(await updateWebhook(c.var.services, { ...webhook, patch: c.req.valid("json") }), 200);
  })
  .openapi(rotateWebhookSecretRoute, async (c) => {
    const webhook = { accountId: c.var.account.id, id: c.req.valid("param").id };
    const rotated = await rotateWebhookSecret(c.var.services, { ...webhook, graceSeconds: c.req.valid("json").grace_seconds });
    return c.json(rotated, 200, { "Cache-Control": "no-store" });
  })
  .openapi(replayWebhookEventsRoute, async (c) => {
    const webhook = { accountId: c.var.account.id, id: c.req.valid("param").id };
    const { services } = c.var;
    const budgets = accountBudgets(c.env.RATE_LIMIT_BUCKETS, services.work);
    return c.json(await replayWebhookEvents({ ...services, budgets }, { ...webhook, request: c.req.valid("json") }), 202);
  })
  .openapi(listWebhookDeliveriesRoute, async (c) =>
    c.json(await listWebhookDeliveries(c.var.services, { accountId: c.var.account.id, id: c.req.valid("param").id }), 200),
  );
