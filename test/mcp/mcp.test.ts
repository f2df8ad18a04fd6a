import { env, exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { HOUR_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, expectJson, randomTestIp, rateLimitOf } from "../helpers/http.ts";
import { captureLogs } from "../helpers/logs.ts";
import { postMcp, toolCall } from "../helpers/mcp.ts";
import { installReceiver } from "../helpers/webhook-receiver.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * /mcp with the official SDK's client over HTTP: its fetch calls the worker's fetch handler, so every
 * request goes through the app's middleware (credential, rate limit) as a client's would.
 */

beforeAll(() => void installReceiver()); // nothing here should go out
afterAll(() => vi.restoreAllMocks());

const responses: Response[] = [];
const workerFetch = async (url: string | URL | Request, init?: RequestInit) => {
  const request = new Request(url, init);
  request.headers.set("CF-Connecting-IP", randomTestIp());
  const res = await exports.default.fetch(request);
  responses.push(res.clone());
  return res;
};

const post = postMcp;

async function connect(key: string) {
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("https://api.test/mcp"), {
    fetch: workerFetch,
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

const structured = (result: Awaited<ReturnType<Client["callTool"]>>) => {
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  expect(JSON.parse((result.content as { text: string }[])[0]!.text)).toEqual(result.structuredContent);
  return result.structuredContent as any;
};
const errorText = (result: Awaited<ReturnType<Client["callTool"]>>) => {
  expect(result.isError).toBe(true);
  return (result.content as { text: string }[])[0]!.text;
};

let key: string;
let productId: string;
let shopId: string;
const sku = `MCP-${Date.now()}-Ünï`;

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  const shop = await createCompetitor({ id: `cmp_mcp_${Date.now()}`, name: "MCP Shop" });
  shopId = shop.id;
  const product = await createProduct({
    sku,
    name: "Kettle Deluxe 2000 ☕",
    brand: "Acme",
    category: "Kettles",
    offers: [{ competitor: shop.id, price: "24.99" }],
  });
  productId = product.id;
  await addHistory(
    product.id,
    Array.from({ length: 12 }, (_, i) => ({
      competitor: shop.id,
      price: `${20 + i}.00`,
      observedAt: new Date(Date.UTC(2026, 0, 1 + i)).toISOString(),
    })),
  );
  await publishSnapshot();
});

describe("/mcp", () => {
  it("lists the five tools and answers each with structured content, validated as the REST routes validate", async () => {
    const client = await connect(key);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      "get_product",
      "list_competitors",
      "price_history",
      "recent_changes",
      "search_products",
    ]);
    // Every tool says what it answers (the client checks each answer's structuredContent against it), and the
    // stateless server announces no tool list changes.
    for (const tool of tools) expect(tool.outputSchema?.type, tool.name).toBe("object");
    const outputOf = (name: string) => tools.find((tool) => tool.name === name)!.outputSchema!;
    expect(Object.keys(outputOf("recent_changes").properties!).sort()).toEqual(["events", "next_cursor"]);
    expect(Object.keys(outputOf("get_product").properties!)).toEqual(expect.arrayContaining(["id", "sku", "offers", "summary"]));
    expect(client.getServerCapabilities()?.tools?.listChanged ?? false).toBe(false);

    const found = structured(await client.callTool({ name: "search_products", arguments: { query: "deluxe", brand: "acme", limit: 5 } }));
    expect(found.products).toEqual([
      expect.objectContaining({
        id: productId,
        sku,
        name: "Kettle Deluxe 2000 ☕",
        brand: "Acme",
        min_price: "24.99",
        currency: "USD",
        offer_count: 1,
        // The price to quote: the cheapest offer in stock (its total where shipping is known).
        lowest_offer: expect.objectContaining({ competitor_id: shopId, price: "24.99", currency: "USD" }),
      }),
    ]);
    // Words, not one phrase: in any order, across name and brand; nothing found comes with what to try.
    const words = structured(await client.callTool({ name: "search_products", arguments: { query: "acme kettle 2000" } }));
    expect(words.products.map((product: { id: string }) => product.id)).toEqual([productId]);
    expect(words.hint).toBeUndefined();
    const none = structured(await client.callTool({ name: "search_products", arguments: { query: "acme headphones" } }));
    expect(none.products).toEqual([]);
    expect(none.hint).toContain('"acme", "headphones" alone');
    expect(none.hint).toContain("brand");
    const filtered = structured(
      await client.callTool({ name: "search_products", arguments: { query: "kettle", category: "no such category" } }),
    );
    expect(filtered).toMatchObject({ products: [], hint: expect.stringContaining("without category") });

    const bySku = structured(await client.callTool({ name: "get_product", arguments: { sku } }));
    expect(bySku).toMatchObject({ id: productId, sku, offers: [expect.objectContaining({ price: "24.99" })] });
    expect(structured(await client.callTool({ name: "get_product", arguments: { id: productId } }))).toEqual(bySku);
    // product_id is id under price_history's name: the same product; both given must agree.
    expect(structured(await client.callTool({ name: "get_product", arguments: { product_id: productId } }))).toEqual(bySku);
    expect(structured(await client.callTool({ name: "get_product", arguments: { id: productId, product_id: productId } }))).toEqual(bySku);
    expect(errorText(await client.callTool({ name: "get_product", arguments: { id: productId, product_id: "prd_other" } }))).toContain(
      "id and product_id name the same thing",
    );
    expect(errorText(await client.callTool({ name: "get_product", arguments: { product_id: productId, sku } }))).toBe(
      "Give exactly one of id (or product_id, the same) and sku.",
    );
    expect(errorText(await client.callTool({ name: "get_product", arguments: {} }))).toBe(
      "Give exactly one of id (or product_id, the same) and sku.",
    );
    expect(errorText(await client.callTool({ name: "get_product", arguments: { id: "prd_nope" } }))).toContain("There is no product");

    const history = structured(await client.callTool({ name: "price_history", arguments: { product_id: productId, points: 4 } }));
    expect(history.history.map((entry: { price: string }) => entry.price)).toEqual(["20.00", "24.00", "27.00", "31.00"]); // first and last kept
    const full = structured(
      await client.callTool({ name: "price_history", arguments: { product_id: productId, from: "2026-01-03", to: "2026-01-05" } }),
    );
    expect(full.history.map((entry: { price: string }) => entry.price)).toEqual(["22.00", "23.00"]);

    expect(structured(await client.callTool({ name: "list_competitors", arguments: {} })).competitors).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: "MCP Shop" })]),
    );

    await ingest([{ sku, price: "19.99", competitor: { id: "cmp_mcp_live", name: "Live Shop" } }]);
    await ingest([{ sku, price: "18.99", competitor: { id: "cmp_mcp_live", name: "Live Shop" } }]);
    await ingest([{ sku, price: "17.99", competitor: { id: "cmp_mcp_live", name: "Live Shop" } }]);
    // The most recent change comes first.
    const changes = structured(await client.callTool({ name: "recent_changes", arguments: { type: "price.changed", limit: 2 } }));
    expect(changes.events.map((event: { data: { sku: string; new_price: string } }) => [event.data.sku, event.data.new_price])).toEqual([
      [sku, "17.99"],
      [sku, "18.99"],
    ]);
    await client.close();
  });

  it("refuses input the REST schemas refuse", async () => {
    const client = await connect(key);
    for (const [name, args, field] of [
      ["search_products", { limit: 0 }, "limit"],
      ["search_products", { limit: 101 }, "limit"],
      ["price_history", { product_id: productId, points: 1 }, "points"],
      ["price_history", { product_id: productId, from: "yesterday" }, "from"],
      ["recent_changes", { type: "price.dropped" }, "type"],
      ["search_products", { brand: "" }, "brand"],
    ] as const) {
      const result = await client
        .callTool({ name, arguments: args })
        .catch((error: Error) => ({ isError: true, content: [{ type: "text", text: error.message }] }));
      expect(errorText(result as never), `${name} ${JSON.stringify(args)}`).toContain(field);
    }
    expect(
      errorText(
        await client.callTool({ name: "price_history", arguments: { product_id: productId, from: "2026-02-01", to: "2026-01-01" } }),
      ),
    ).toBe("to: must be later than from");
    await client.close();
  });

  it("each tool needs the scope of the route it reads: a tool error naming the scope without it, the answer with it", async () => {
    const { token } = await freshAccount({ plan: "premium" });
    const scopedKey = async (scopes: string[]) =>
      (await expectJson(await call("POST", "/api-keys", { token, body: { name: "scoped", scopes } }), 201)).key;
    const calls = [
      ["search_products", { query: "deluxe" }, "products:read"],
      ["get_product", { id: productId }, "products:read"],
      ["list_competitors", {}, "products:read"],
      ["price_history", { product_id: productId }, "history:read"],
      ["recent_changes", {}, "events:read"],
    ] as const;
    for (const scope of ["products:read", "history:read", "events:read"]) {
      const client = await connect(await scopedKey([scope]));
      for (const [name, args, needs] of calls) {
        const result = await client.callTool({ name, arguments: args });
        if (needs === scope) structured(result);
        else
          expect(errorText(result), `${scope}: ${name}`).toBe(
            `This API key lacks the ${needs} scope this tool needs; add it to the key's scopes (PATCH /api-keys/{id}) or use another key.`,
          );
      }
      await client.close();
    }
    // Two of three: only the third's tools are refused.
    const client = await connect(await scopedKey(["products:read", "history:read"]));
    expect(
      structured(await client.callTool({ name: "price_history", arguments: { product_id: productId } })).history.length,
    ).toBeGreaterThan(0);
    expect(errorText(await client.callTool({ name: "recent_changes", arguments: {} }))).toContain("lacks the events:read scope");
    await client.close();
  });

  it("every HTTP request counts against the key: the usual headers, 401 without a key, 429 over the limit", async () => {
    const { key: free } = await freshAccount({ plan: "free" });
    responses.length = 0;
    const client = await connect(free); // initialize, the initialized notification, the GET for a server stream (405: stateless)
    await client.callTool({ name: "list_competitors", arguments: {} });
    const remaining = responses.map((res) => rateLimitOf(res).remaining);
    expect(remaining).toEqual(Array.from({ length: responses.length }, (_, i) => 9 - i)); // one each, whatever it was
    expect(responses.every((res) => rateLimitOf(res).limit === 10)).toBe(true);
    while (rateLimitOf(responses.at(-1)!).remaining! > 0) await client.callTool({ name: "list_competitors", arguments: {} });
    await expect(client.callTool({ name: "list_competitors", arguments: {} })).rejects.toThrow();
    const refused = responses.at(-1)!;
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({
      detail: "Rate limit exceeded: 10 requests per minute.",
      help: expect.stringMatching(/^Retry after \d+ s /),
    });
    expect(rateLimitOf(refused).retryAfter).toBeGreaterThanOrEqual(1);

    // Stateless: a lone tools/call, no initialize, as the README's curl sends it.
    const { key: other } = await freshAccount({ plan: "free" });
    const raw = await post(other, toolCall(1, "search_products", { query: "deluxe" }));
    expect(raw.status).toBe(200);
    expect(
      ((await raw.json()) as { result: { structuredContent: { products: { sku: string }[] } } }).result.structuredContent.products.map(
        (p) => p.sku,
      ),
    ).toContain(sku);
    expect(rateLimitOf(raw).remaining).toBe(9);

    const anonymous = await exports.default.fetch(
      new Request("https://api.test/mcp", {
        method: "POST",
        headers: { "CF-Connecting-IP": randomTestIp(), "Content-Type": "application/json" },
        body: "{}",
      }),
    );
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("WWW-Authenticate")).toContain("Bearer");
  });

  it("takes one message per request: a JSON-RPC batch is refused whole with a detail, and counts once", async () => {
    const { key: free } = await freshAccount({ plan: "free" });
    const batch = Array.from({ length: 100 }, (_, i) => toolCall(i, "search_products", { query: "deluxe" }));
    const refused = await post(free, batch);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      detail:
        "This body is a JSON-RPC batch (an array); /mcp takes one message per request (the protocol's 2025-06-18 revision has no " +
        "batches). Send each message in its own POST.",
    });
    // Admission counts the request before its body is read: one of the Free key's 10 a minute, not 100 and not none.
    expect(rateLimitOf(refused).remaining).toBe(9);
    const single = await post(free, toolCall(1, "search_products", { query: "deluxe" }));
    expect(single.status).toBe(200);
    expect(rateLimitOf(single).remaining).toBe(8);
  });

  it("search_products' query has 3 to 200 characters and no control character: otherwise a tool error naming query, nothing logged", async () => {
    const logged = captureLogs();
    const client = await connect(key);
    for (const query of ["de", "☕☕", "😀😀", "a\u0000bc", `deluxe\u0000`, "del\tuxe", "x".repeat(201)]) {
      const result = await client
        .callTool({ name: "search_products", arguments: { query } })
        .catch((error: Error) => ({ isError: true, content: [{ type: "text", text: error.message }] }));
      expect(errorText(result as never), JSON.stringify(query)).toMatch(/at query/);
    }
    // Three characters (counted as characters, not UTF-16 units: "😀😀" is two), one not ASCII: through the index.
    expect(structured(await client.callTool({ name: "search_products", arguments: { query: "del" } })).products).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: productId })]),
    );
    expect(structured(await client.callTool({ name: "search_products", arguments: { query: "0 ☕" } })).products).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: productId })]),
    );
    expect(logged).toEqual([]);
    await client.close();
  });

  it("recent_changes gives the newest first, pages back with after (a page's next_cursor), and never returns an account's events", async () => {
    const since = new Date(Date.now() - HOUR_MS - 1000).toISOString();
    const before = await commitEvents(1, 3);
    const accountEvent = `evt_${"a".repeat(32)}`;
    await env.DB.prepare(
      "INSERT INTO events (id, type, timestamp, payload, account_id, fanned_out_at) VALUES (?, 'api_key.leaked', ?, '{}', 'acct_mcp_other', ?)",
    )
      .bind(accountEvent, new Date(Date.now() - HOUR_MS).toISOString(), new Date().toISOString())
      .run();
    const after = await commitEvents(1, 3);
    const client = await connect(key);
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = structured(
        await client.callTool({ name: "recent_changes", arguments: { since, limit: 2, ...(cursor && { after: cursor }) } }),
      );
      pages.push(page.events.map((event: { id: string }) => event.id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor && pages.length < 10); // a cursor not followed would give the first page for ever
    expect(cursor).toBeUndefined();
    const seen = pages.flat();
    expect(seen.slice(0, 6)).toEqual([...before, ...after].reverse());
    expect(seen).not.toContain(accountEvent);
    expect(pages.slice(0, -1).every((page) => page.length === 2)).toBe(true);
    // The events GET /events gives for the same query, the other way round.
    const feed: string[] = [];
    let next: string | null = null;
    do {
      const path = `/events?since=${encodeURIComponent(since)}&limit=2${next ? `&after=${next}` : ""}`;
      const page = (await expectJson(await call("GET", path, { token: key }), 200)) as {
        events: { id: string }[];
        next_cursor: string | null;
      };
      feed.push(...page.events.map((event) => event.id));
      next = page.next_cursor;
    } while (next);
    expect(seen).toEqual(feed.toReversed());
    // A cursor older than the retention (or unknown): GET /events' 410, as a tool error.
    expect(errorText(await client.callTool({ name: "recent_changes", arguments: { after: `evt_${"0".repeat(32)}` } }))).toContain(
      "is older than 30 days or unknown",
    );
    await client.close();
  });
});
