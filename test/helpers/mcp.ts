import { exports } from "cloudflare:workers";
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
