import { exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";
import { randomTestIp } from "./http.ts";

/** One raw POST to /mcp, as the README's curl sends it (no initialize: the server is stateless). */
export const postMcp = (key: string, body: unknown) =>
  exports.default.fetch(
    new Request("https://api.test/mcp", {
      method: "POST",
      headers: {
        Authorization: `Bearer ${key}`,
        "Content-Type": "application/json",
        Accept: "application/json, text/event-stream",
        "CF-Connecting-IP": randomTestIp(),
      },
      body: JSON.stringify(body),
    }),
  );

export const toolCall = (id: number, name: string, args: Record<string, unknown>) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args },
});

/** The SDK's own client on /mcp with an API key; `seen` looks at every response (a test's check on what comes back). */
export async function mcpClient(apiKey: string, seen?: (res: Response) => Promise<void> | void): Promise<Client> {
  const client = new Client({ name: "price-data-tests", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("https://api.test/mcp"), {
    fetch: async (url, init) => {
      const request = new Request(url, init);
      request.headers.set("CF-Connecting-IP", randomTestIp());
      const res = await exports.default.fetch(request);
      await seen?.(res.clone());
      return res;
    },
    requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
  });
  await client.connect(transport);
  return client;
}

/** A method of the events extension through the SDK client (its result as JSON; a JSON-RPC error is thrown as McpError). */
export const eventsCall = (client: Client, method: string, params: Record<string, unknown>) =>
  client.request({ method, params }, z.looseObject({})) as Promise<Record<string, unknown>>;
