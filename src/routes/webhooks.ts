import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { requireAccount } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { WEBHOOK_EVENT_TYPES } from "../db/schema.ts";
import { createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, sendTestEvent, webhookView } from "../services/webhooks.ts";
import { parseJsonBody } from "../validation.ts";
import { webhookUrlProblem } from "../webhooks/url-policy.ts";
import { noQuery } from "./catalogue-queries.ts";
import { emptyResponse, jsonBody, jsonResponse, openApiApp, operation, serve } from "./openapi.ts";
import { CreatedWebhook, DeliveryList, TestEventQueued, Webhook, WebhookList } from "./responses.ts";
import { jsonObject, required } from "./schemas.ts";

/** min_change_pct: 0 to 1000 (a price can more than double), at most 2 decimals; stored as basis points. */
const minChangePct = z
  .number({ error: required("number") })
  .min(0, { error: "must be between 0 and 1000" })
  .max(1000, { error: "must be between 0 and 1000" })
  .refine((pct) => Math.abs(pct * 100 - Math.round(pct * 100)) < 1e-6, { error: "must have at most 2 decimals" })
  .transform((pct) => Math.round(pct * 100));

/** The body schema; whether http:// and private hosts are allowed depends on WEBHOOK_ALLOW_INSECURE_URLS. */
function webhookBody(allowInsecure: boolean) {
  return z.strictObject(
    {
      url: z
        .string({ error: required("string") })
        .trim()
        .superRefine((url, ctx) => {
          const problem = webhookUrlProblem(url, allowInsecure);
          if (problem) ctx.addIssue({ code: "custom", message: problem, input: url });
        })
        .transform((url) => new URL(url).href)
        .meta({ description: "https:// URL of a public host (no localhost, private or link-local addresses)", example: "https://example.com/hooks/prices" }),
      events: z
        .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(", ")}` }), { error: required("array") })
        .min(1, { error: "must name at least one event type" })
        .transform((events) => WEBHOOK_EVENT_TYPES.filter((type) => events.includes(type)))
        .default([...WEBHOOK_EVENT_TYPES])
        .meta({ description: "The event types to receive; all by default" }),
      min_change_pct: minChangePct.default(0).meta({ description: "Only price changes of at least this many percent (0 to 1000, 2 decimals)", example: 5 }),
      description: z
        .string({ error: required("string") })
        .trim()
        .max(500, { error: "must be at most 500 characters" })
        .nullable()
        .default(null)
        .meta({ description: "A note for you, up to 500 characters" }),
    },
    jsonObject,
  );
}
const bodies = { secure: webhookBody(false), insecure: webhookBody(true) };

const webhookId = z.object({ id: z.string().meta({ description: "The webhook's id (`whk_…`)", example: "whk_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }) });
const common = { tags: ["Webhooks"], credential: "account" as const, middleware: [requireAccount] };

const create = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/",
    operationId: "createWebhook",
    summary: "Register a webhook",
    description:
      "The URL must be https:// and name a public host. The signing secret is in this response only. At most 20 webhooks per account (then 409). " +
      "Deliveries follow Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature) and are retried for about a day; a 410 disables the webhook.",
    request: { body: jsonBody(bodies.secure, "The endpoint, and optionally which events, a minimum price change and a description") },
    errors: { conflict: true },
    responses: { 201: jsonResponse("The webhook, with its signing secret", CreatedWebhook, ["Cache-Control"]) },
  }),
);

const list = createRoute(
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

const get = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}",
    operationId: "getWebhook",
    summary: "One webhook",
    request: { params: webhookId, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The webhook (never its secret)", Webhook) },
  }),
);

const remove = createRoute(
  operation({
    ...common,
    method: "delete",
    path: "/{id}",
    operationId: "deleteWebhook",
    summary: "Delete a webhook and its delivery records",
    request: { params: webhookId },
    errors: { notFound: true },
    responses: { 204: emptyResponse("Deleted") },
  }),
);

const test = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/{id}/test",
    operationId: "testWebhook",
    summary: "Send a webhook.test event to this webhook",
    description: "Queued at once; the delivery shows in its deliveries. 409 when the webhook is disabled.",
    request: { params: webhookId },
    errors: { notFound: true, conflict: true },
    responses: { 202: jsonResponse("The test event is queued", TestEventQueued) },
  }),
);

const deliveries = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}/deliveries",
    operationId: "listWebhookDeliveries",
    summary: "The webhook's latest 100 delivery attempts",
    request: { params: webhookId, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The attempts, newest first", DeliveryList) },
  }),
);

/** Account login. Webhook ids of another account are 404, as if they did not exist. */
export const webhookRoutes = openApiApp();
serve(webhookRoutes, create, async (c) => {
  const body = await parseJsonBody(c, c.var.config.WEBHOOK_ALLOW_INSECURE_URLS ? bodies.insecure : bodies.secure);
  const created = await createWebhook(database(c.env.DB, c.var.work), c.var.config.WEBHOOK_SECRET_KEY, c.var.account.id, {
    url: body.url,
    events: body.events,
    minChangeBp: body.min_change_pct,
    description: body.description || null,
  });
  return c.json(created, 201, { "Cache-Control": "no-store" });
});
serve(webhookRoutes, list, async (c) => {
  const rows = await listWebhooks(database(c.env.DB, c.var.work), c.var.account.id);
  return c.json({ webhooks: rows.map(webhookView) }, 200);
});
serve(webhookRoutes, get, async (c) => {
  return c.json(webhookView(await getWebhook(database(c.env.DB, c.var.work), c.var.account.id, c.req.valid("param").id)), 200);
});
serve(webhookRoutes, remove, async (c) => {
  await deleteWebhook(database(c.env.DB, c.var.work), c.var.account.id, c.req.valid("param").id);
  return c.body(null, 204);
});
serve(webhookRoutes, test, async (c) => {
  return c.json(await sendTestEvent(database(c.env.DB, c.var.work), c.env.WEBHOOK_QUEUE, c.var.account.id, c.req.valid("param").id), 202);
});
serve(webhookRoutes, deliveries, async (c) => {
  return c.json(await listDeliveries(database(c.env.DB, c.var.work), c.var.account.id, c.req.valid("param").id), 200);
});
