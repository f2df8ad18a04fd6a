import { createRoute } from "@hono/zod-openapi";
import { feedQuery } from "../events/query.ts";
import { jsonResponse, openApiApp } from "../http/openapi.ts";
import { ErrorBody } from "../http/openapi-components.ts";
import { operation } from "../operation/operation.ts";
import { ACCOUNT_EVENT_TYPES } from "../platform/tables.ts";
import { AccountEventFeed } from "./schema.ts";
import { listAccountEvents } from "./service.ts";

const listAccountEventsRoute = createRoute(
  operation({
    tags: ["Account"],
    credential: "account",
    method: "get",
    path: "/",
    operationId: "listAccountEvents",
    summary: "What happened to the account's keys and webhooks, the last 30 days",
    description:
      "The account's own api_key.leaked, api_key.expiring, webhook.disabled and usage.threshold events, oldest first, as its webhooks " +
      "that subscribe to them receive them, plus `id`. Never another account's, and never in GET /events. The query and paging of GET " +
      "/events: `after` (the previous page's next_cursor), `since`, `type` (repeatable), `limit` (1–1000, default 100).",
    request: { query: feedQuery(ACCOUNT_EVENT_TYPES, "AccountEventType") },
    responses: {
      200: jsonResponse("A page of the account's events", AccountEventFeed),
      410: jsonResponse("The cursor's event is no longer kept, or is not this account's", ErrorBody),
    },
  }),
);

/** GET /account/events (account login). */
export const accountEventRoutes = openApiApp().openapi(listAccountEventsRoute, async (c) =>
  c.json(await listAccountEvents(c.var.services.db, c.var.account.id, c.req.valid("query")), 200),
);
