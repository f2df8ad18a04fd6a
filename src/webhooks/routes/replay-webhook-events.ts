import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { budgetLabel } from "../../rate-limit/account-budgets.ts";
import { accountBudgets } from "../../rate-limit/stub.ts";
import { replayWebhookEvents } from "../replay.ts";
import { MAX_REPLAY_EVENTS, ReplayQueued, replayBody, webhookIdParam } from "../schema.ts";
import { common } from "./common.ts";

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

export const registerReplayWebhookEvents = (app: OpenApiApp) =>
  app.openapi(replayWebhookEventsRoute, async (c) => {
    const webhook = { accountId: c.var.account.id, id: c.req.valid("param").id };
    const { services } = c.var;
    const budgets = accountBudgets(c.env.RATE_LIMIT_BUCKETS, services.work);
    return c.json(await replayWebhookEvents({ ...services, budgets }, { ...webhook, request: c.req.valid("json") }), 202);
  });
