import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, openApiApp } from "../http/openapi.ts";
import { ErrorBody } from "../http/openapi-components.ts";
import { operation } from "../operation/operation.ts";
import { eventsQuery } from "./query.ts";
import { EventFeed } from "./schema.ts";

const listEventsRoute = createRoute(
  operation({
    tags: ["Events"],
    credential: "api-key",
    scope: "events:read",
    method: "get",
    path: "/",
    operationId: "listEvents",
    summary: "The catalogue's events of the last 30 days",
    description:
      "Every price.changed and stock.changed event, oldest first, as webhooks carry them plus `id`: the way to catch up after a webhook " +
      "was down. Page with `after` (the previous page's next_cursor); `since`, `type` (repeatable) and `limit` (1–1000, default 100) " +
      "filter. Every live API key sees every catalogue event; a test key sees its account's sandbox events only, kept 7 days. " +
      "`after` naming an event older than 30 days is 410: start again with `since`. A " +
      "page may hold fewer than `limit` events and still carry a `next_cursor` (older events are read in bounded steps): follow it.",
    request: { query: eventsQuery },
    responses: { 200: jsonResponse("A page of events", EventFeed), 410: jsonResponse("The cursor's event is no longer kept", ErrorBody) },
  }),
);

/** GET /events (API key). */
export const eventRoutes = openApiApp().openapi(listEventsRoute, async (c) => {
  // A test key's feed is its account's sandbox events (POST /test/observations), and only those. The live feed's pages
  // may come from a read replica: an event a replica does not hold yet shows in a read a moment later.
  return c.json(await c.var.keyData.feed(c.req.valid("query")), 200);
});
