import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { Hono } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { requireApiKey } from "../middleware/guards.ts";
import { mcpServer } from "./server.ts";

/**
 * /mcp: the Model Context Protocol over Streamable HTTP, stateless (no session: every POST carries a
 * whole exchange, answered as JSON). It sits behind the app's middleware like any data route, so each
 * HTTP request to it is admitted and counted against the key's limits, with the usual headers, 401 and
 * 429. Not an OpenAPI operation: JSON-RPC is its own protocol (README: how to add it to a client).
 */
export const mcpRoutes = new Hono<AppEnv>().all("/", requireApiKey, async (c) => {
  const { db, archive, catalogue } = c.var.services;
  const server = mcpServer({ db, archive, catalogue }, c.var.apiKey.scopes);
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(c.req.raw);
  } finally {
    c.executionCtx.waitUntil(server.close());
  }
});
