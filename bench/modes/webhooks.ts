/**
 * `npm run bench -- --webhooks`: the real worker alone on an empty catalogue (through wrangler's proxy,
 * as this mode has always measured): the webhook latency (bench/modes/webhook-latency.ts), then the
 * stream's latency and MCP's cost beside REST (bench/modes/stream-mcp.ts). Prints its report only.
 */
import type { Bench } from "../harness/bench.ts";
import type { Run } from "../harness/settings.ts";
import { startOursAlone } from "../harness/start.ts";
import { streamAndMcp, streamAndMcpReport } from "./stream-mcp.ts";
import { webhookLatency, webhookLatencyReport } from "./webhook-latency.ts";

export async function webhooksMode(bench: Bench, { settings }: Run): Promise<string> {
  const worker = await startOursAlone(bench, { vars: { WEBHOOK_ALLOW_INSECURE_URLS: "true" }, direct: false });
  bench.step(`webhook latency: ${settings.webhookSamples} price changes, one at a time`);
  const tokens = { admin: await bench.token("bench-admin", "prices:write accounts:write"), account: await bench.token("bench-webhooks") };
  const hooks = webhookLatencyReport(await webhookLatency(worker.url, tokens, settings.webhookSamples));
  bench.step(`the stream: ${settings.webhookSamples} price changes, one at a time; MCP tool calls beside REST`);
  // Premium (300 a minute): the MCP comparison alone makes 120 calls with the account's key.
  await fetch(`${worker.url}/admin/accounts/bench-webhooks/plan`, {
    method: "PUT",
    headers: { Authorization: `Bearer ${tokens.admin}` },
    body: JSON.stringify({ plan: "premium" }),
  });
  return [...hooks, "", ...streamAndMcpReport(await streamAndMcp(worker.url, tokens, settings.webhookSamples))].join("\n");
}
