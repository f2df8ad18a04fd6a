import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { generateWebhookSecret } from "../../src/webhooks/secrets.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { AgentProvider, answerConsent, ORIGIN, openConsent, workerFetch } from "../helpers/connect.ts";
import { call, expectJson } from "../helpers/http.ts";
import { eventsCall, postMcp } from "../helpers/mcp.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * An agent's whole journey (issue 50), with the official MCP TypeScript SDK's client: it connects by OAuth (its own
 * OAuth client provider; the user's sign-in and consent are the test's, as the IdP's login is in every login test),
 * lists the tools, subscribes to "any Sony headphones below 280.00", and is sent the signed event when the price moves;
 * it refreshes, unsubscribes, and nothing more arrives; its user revokes the connector key, and its next call is 401.
 * All through the real worker, D1, queues and objects; the receiver answers the worker's outbound fetch inside the
 * isolate (test/helpers/webhook-receiver.ts), the one thing beyond this machine.
 */

let receiver: Receiver;
beforeAll(() => {
  receiver = installReceiver();
});
afterAll(() => vi.restoreAllMocks());

const SONY_BELOW_280 = { brands: ["Sony"], categories: ["Headphones"], currency: "USD", price_below: "280.00" };
/** The POSTs a URL got that were deliveries (not the subscription's verification). */
const deliveriesTo = (url: string) => receiver.to(url).filter((request) => !request.body.includes('"type":"verification"'));

describe("an agent connected by OAuth and told of price moves", () => {
  it("subscribes through the SDK's client, is sent the signed event within a second of the ingestion's answer, refreshes, unsubscribes, and is refused once its key is revoked", async () => {
    const alice = await freshAccount({ plan: "premium" });
    const provider = new AgentProvider();
    const transport = () => new StreamableHTTPClientTransport(new URL(`${ORIGIN}/mcp`), { authProvider: provider, fetch: workerFetch });
    const first = transport();
    await expect(new Client({ name: "agent", version: "1.0.0" }).connect(first)).rejects.toThrow(UnauthorizedError);
    const outcome = await answerConsent(alice.token, await openConsent(provider.authorizationUrl!));
    await first.finishAuth(new URL(outcome.redirect_to).searchParams.get("code")!);
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(transport());
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain("search_products");

    const sku = `AGENT-${crypto.randomUUID()}`;
    await ingest([{ sku, brand: "Sony", category: "Headphones", price: "300.00" }]);
    const url = hookUrl("agent");
    const secret = generateWebhookSecret();
    const params = { name: "price.changed", arguments: SONY_BELOW_280, delivery: { mode: "webhook", url, secret }, ttlMs: 600_000 };
    const subscribed = await eventsCall(client, "events/subscribe", params);
    expect(subscribed.id).toMatch(/^sub_/);

    // The move below 280.00: pushed, not polled; the ingestion's answer starts the clock.
    await ingest([{ sku, brand: "Sony", category: "Headphones", price: "279.00" }]);
    await settled(() => expect(deliveriesTo(url)).toHaveLength(1), 10);
    const [delivery] = deliveriesTo(url);
    expect(delivery!.headers["x-mcp-subscription-id"]).toBe(subscribed.id);
    expect(verifyWithLibrary(secret, delivery!)).toMatchObject({ name: "price.changed", data: { sku, new_price: "279.00" } });

    // A refresh: the same subscription, a later refreshBefore.
    const refreshed = await eventsCall(client, "events/subscribe", params);
    expect(refreshed.id).toBe(subscribed.id);
    expect(Date.parse(refreshed.refreshBefore as string)).toBeGreaterThanOrEqual(Date.parse(subscribed.refreshBefore as string));

    // Unsubscribed, a further move below 280.00 sends nothing.
    expect(await eventsCall(client, "events/unsubscribe", { name: params.name, arguments: params.arguments, delivery: { url } })).toEqual(
      {},
    );
    await ingest([{ sku, brand: "Sony", category: "Headphones", price: "250.00" }]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(deliveriesTo(url)).toHaveLength(1);

    // Its user revokes the connector key: the very next /mcp call is 401.
    await expectJson(await call("DELETE", `/api-keys/${outcome.key_id}`, { token: alice.token }), 200);
    const refused = await postMcp(provider.tokens()!.access_token, { jsonrpc: "2.0", id: 9, method: "tools/list", params: {} });
    expect(refused.status).toBe(401);
    await client.close();
  });
});
