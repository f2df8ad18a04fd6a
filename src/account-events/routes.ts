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
    summary: "Four kinds of notice to the account, the last 30 days: a key leaked or expiring, a webhook disabled, a usage threshold",
    description:
      "The account's own notices, and only these four: api_key.leaked (a key found in public and revoked), api_key.expiring (a key " +
      "expires in 7 days, then in 1), webhook.disabled (a webhook turned off by a 410 or by 5 days of failure) and usage.threshold " +
      "(a key's requests of the UTC day reached 80 %, then 100 %, of its day quota); oldest first, as its webhooks that subscribe to them receive them, plus `id`. It is not " +
      "an audit log: creating, rotating or revoking a key and creating, changing or deleting a webhook are not in it (the " +
      "records themselves say when: GET /api-keys, GET /webhooks). Never another account's, and never in GET /events. The query and paging of GET " +
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
