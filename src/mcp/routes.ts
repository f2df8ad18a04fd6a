import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { Hono } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import { requireApiKey } from "../operation/guards.ts";
import { accountBudgets } from "../rate-limit/stub.ts";
import { mcpServer } from "./server.ts";

/**
 * /mcp: the Model Context Protocol over Streamable HTTP, stateless (no session: every POST carries a
 * whole exchange, answered as JSON). It sits behind the app's middleware like any data route, so each
 * HTTP request to it is admitted and counted against the key's limits, with the usual headers, 401 and
 * 429. Not an OpenAPI operation: JSON-RPC is its own protocol (README: how to add it to a client).
 */

/**
 * One message per request: the SDK would run a JSON-RPC batch of up to 100 calls for one counted request,
 * and the protocol's 2025-06-18 revision has no batches, so an array body is refused. It still counts once:
 * admission runs before any body is read.
 */
const BATCH_REFUSED =
  "This body is a JSON-RPC batch (an array); /mcp takes one message per request (the protocol's 2025-06-18 revision has no " +
  "batches). Send each message in its own POST.";

export const mcpRoutes = new Hono<AppEnv>().all("/", requireApiKey, async (c) => {
  // Read once here, handed to the transport; a body that is not JSON is left to the transport's own answer.
  const message: unknown =
    c.req.method === "POST"
      ? await c.req.raw
          .clone()
          .json()
          .catch(() => undefined)
      : undefined;
  if (Array.isArray(message)) throw new ApiError(400, BATCH_REFUSED);
  const { db, alerts, archive, queue, config, work, sandboxOf, sandboxFacts } = c.var.services;
  const { id, accountId, environment, scopes } = c.var.apiKey;
  // The tools read the key's environment's data (a test key's: its account's sandbox) through the one door.
  const server = mcpServer(c.var.keyData, scopes, {
    db,
    alerts,
    archive,
    queue,
    config,
    budgets: accountBudgets(c.env.RATE_LIMIT_BUCKETS, work),
    sandboxOf,
    sandboxFacts,
    key: { id, accountId, environment, scopes },
    data: c.var.keyData,
  });
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(c.req.raw, { parsedBody: message });
  } finally {
    c.executionCtx.waitUntil(server.close());
  }
});
