import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { jsonResponse, openApiApp } from "../http/openapi.ts";
import { ErrorBody, EVERY, headerRefs } from "../http/openapi-components.ts";
import { operation } from "../operation/operation.ts";
import { WEBHOOK_EVENT_TYPES } from "../platform/tables.ts";
import { LIFETIME_MS, MAX_STREAMS_PER_ACCOUNT, MAX_STREAMS_PER_KEY } from "./limits.ts";
import { lastEventIdHeader, streamFilters, streamQuery } from "./schema.ts";
import { BACKFILL_EXAMINED_MAX, closeSocket, DEFAULT_TIMING, eventFrames, frameStream, HEARTBEAT_MS, subscribe } from "./service.ts";
import { hubOf } from "./stub.ts";

const streamEventsRoute = createRoute(
  operation({
    tags: ["Events"],
    credential: "api-key",
    scope: "events:read",
    method: "get",
    path: "/",
    operationId: "streamEvents",
    summary: "The catalogue's events as they happen (server-sent events)",
    description:
      "GET /events' query (not `limit`) plus the webhooks' alert rules as parameters (lists repeated). With `after` (or " +
      "`Last-Event-ID`, which EventSource sends when it reconnects) or `since`, first the stored events from there; with " +
      "neither, the stream starts at the present (no backfill). Then new events, pushed as each ingestion commits them. " +
      "Each event is `id: <event id>`, `event: <type>`, " +
      `\`data: <the event as GET /events gives it>\`; a comment line comes at least every ${HEARTBEAT_MS / 1000} s. ` +
      "Catalogue events only: account events never reach a stream. A test key's stream carries its account's sandbox " +
      "events (POST /test/observations) and nothing else; a live key's never carries them. A backfill examines at most " +
      `${BACKFILL_EXAMINED_MAX.toLocaleString("en")} events per connection; when it stops there the stream sends ` +
      "`id: <the last event examined>` with no `data` and ends, so a reconnect resumes past what was examined even if " +
      "nothing matched. Opening a stream counts as one request; a key may hold " +
      `${MAX_STREAMS_PER_KEY} streams at once and an account ${MAX_STREAMS_PER_ACCOUNT} over all its keys (then 429 ` +
      "naming the cap). A stream never sends an event written after its key stopped being admissible (revoked, leaked, " +
      "expired, past its rotation's grace, or its `scopes` or `allowed_ips` no longer admitting it) and ends within " +
      `${HEARTBEAT_MS / 1000} s of that. The server ends a stream after ${LIFETIME_MS / 60_000} minutes (or on a ` +
      "deploy, or a restart of the server's side of it), with the last event examined as its `id`: reconnect with Last-Event-ID and nothing is missed.",
    request: { query: streamQuery, headers: lastEventIdHeader },
    responses: {
      200: {
        description: "The stream",
        headers: headerRefs([...EVERY]),
        content: {
          "text/event-stream": {
            schema: z.string().meta({
              description: "Server-sent events",
              example:
                "id: evt_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d\nevent: price.changed\ndata: " +
                '{"id":"evt_0f3c…","type":"price.changed","timestamp":"…","data":{…}}\n\n',
            }),
          },
        },
      },
      410: jsonResponse("The cursor's event is no longer kept", ErrorBody),
    },
  }),
);

/** GET /events/stream (API key). */
export const streamRoutes = openApiApp().openapi(streamEventsRoute, async (c) => {
  const { after, since, type, ...rest } = c.req.valid("query");
  const key = c.var.apiKey;
  const request = {
    after: after ?? c.req.valid("header")["last-event-id"],
    since,
    // The feed's types when none is asked for: account events never reach a stream.
    rule: { types: type ?? WEBHOOK_EVENT_TYPES, minChangeBp: 0, filters: streamFilters({ after, since, type, ...rest }) },
  };
  const socket = await subscribe(
    hubOf(c.env, key.accountId),
    {
      keyId: key.id,
      keyHash: key.keyHash,
      accountId: key.accountId,
      environment: key.environment,
      request: key.request,
      rule: request.rule,
    },
    c.var.services.work,
  );
  const closed = new AbortController();
  try {
    const frames = await eventFrames(
      { db: c.var.services.db, data: c.var.keyData },
      { request, key, socket, timing: DEFAULT_TIMING, closed: closed.signal },
    );
    // A client gone before the frames began: their generator never ran, so its end cannot close the socket.
    const cancel = () => {
      closed.abort();
      closeSocket(socket);
    };
    return c.body(c.var.services.work.carry(frameStream(frames, cancel)), 200, {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-cache",
      "X-Accel-Buffering": "no",
    });
  } catch (error) {
    closeSocket(socket);
    throw error;
  }
});
