import { McpServer, type RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { holdsScope, type KeyScope, missingScopeDetail } from "../api-keys/scopes.ts";
import { ApiError } from "../http/errors.ts";
import type { KeyData } from "../key-data/door.ts";
import { logger } from "../platform/log.ts";
import { registerEventMethods } from "./events/methods.ts";
import type { EventsServices } from "./events/service.ts";
import {
  getProductOutput,
  listCompetitorsOutput,
  priceHistoryOutput,
  recentChangesOutput,
  searchProductsOutput,
} from "./output-schemas.ts";
import { listToolsPortably } from "./portable.ts";
import {
  getProductInput,
  priceHistoryInput,
  priceHistoryOf,
  productWanted,
  recentChangesInput,
  recentChangesQuery,
  searchHint,
  searchProductsInput,
} from "./tools.ts";

/**
 * The MCP server of one HTTP request (stateless: a new one each time, as the SDK's stateless Streamable HTTP mode
 * wants). Each tool declares its `outputSchema` (src/mcp/output-schemas.ts) and answers with `structuredContent` (the
 * JSON its REST route would give) and the same JSON as text for clients that read only text. An ApiError (a 404, a
 * rule a schema cannot hold) becomes a tool error whose text is its detail; anything else is logged and answered with
 * a generic error, never a stack trace. Each tool needs the scope of the REST route it reads; a key without it gets a
 * tool error naming the scope (the HTTP request itself, admitted before any tool is known, is counted like every
 * request to /mcp). The server also speaks the MCP events extension (src/mcp/events/): subscriptions to price and stock
 * changes, delivered as webhooks are.
 */

const SERVER_INFO = { name: "price-data-api", version: "1.0.0" };

/** What a host shows its model before any tool is called: what the tools are for and how their arguments fit together. */
const INSTRUCTIONS = [
  "Competitors' prices for a product catalogue: each product (id prd_…, and its own SKU) has offers, one per competitor, with " +
    "price, shipping, total_price and stock.",
  "search_products finds products by words: every word must appear in the name, brand or SKU, in any order and any case " +
    '("sony headphones"); when nothing matches, its `hint` says what to try (fewer words, a brand or category filter). ' +
    "Each product it lists carries lowest_offer: the lowest price in stock (the total with shipping where known), the one " +
    "to quote as the product's price.",
  "get_product takes the product's id (as `id` or `product_id`, the same thing) or its `sku`; price_history takes " +
    "`product_id`. Ids come from search_products, SKUs from the user's own catalogue.",
  "Prices are in each offer's own currency. Give `currency` (ISO-4217) to the product tools to have every offer converted " +
    "with the latest reference rates and lowest_offer compared across currencies; a currency without a rate is refused " +
    "(GET /fx-rates lists the currencies that have one).",
  "list_competitors names the competitors; recent_changes lists price and stock changes, newest first.",
].join("\n\n");

const refused = (detail: string): CallToolResult => ({ isError: true, content: [{ type: "text", text: detail }] });

async function answer(run: () => Promise<unknown>): Promise<CallToolResult> {
  try {
    const result = (await run()) as Record<string, unknown>;
    return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: result };
  } catch (error) {
    if (error instanceof ApiError) return refused(error.detail);
    logger("mcp").error("tool failed", { error: String(error) });
    return { isError: true, content: [{ type: "text", text: "The tool failed; try again later." }] };
  }
}

/** The tool's answer when the key holds `scope`; otherwise the tool error a REST route's 403 would carry. */
const scoped =
  (scopes: readonly string[] | null | undefined) =>
  (scope: KeyScope, run: () => Promise<unknown>): Promise<CallToolResult> =>
    holdsScope(scopes, scope) ? answer(run) : Promise.resolve(refused(missingScopeDetail(scope, "tool")));

export function mcpServer(data: KeyData, keyScopes: readonly string[] | null | undefined, events: EventsServices): McpServer {
  const server = new McpServer(SERVER_INFO, { instructions: INSTRUCTIONS });
  registerEventMethods(server.server, events);
  const readOnly = { readOnlyHint: true, openWorldHint: false };
  const answerIf = scoped(keyScopes);
  const tools: Record<string, RegisteredTool> = {};
  tools.search_products = server.registerTool(
    "search_products",
    {
      description:
        "Find products by words (each in the name, brand or SKU, in any order; at least 3 characters in all) and filters; a compact view of each with lowest_offer (the price to quote: the cheapest offer in stock, shipping " +
        "included where known; min_price is the lowest listed price of the main currency, stock and shipping aside) " +
        "and the offer count (in `currency` when given), in the order of the index read (the text's, else product id). Each filter reads at most `limit` of its " +
        "products; when every one has more, the first of query, brand, category, competitor is checked against the others and " +
        "`truncated` says more may match beyond them (narrow the search). When nothing matches, `hint` says what to try.",
      inputSchema: searchProductsInput,
      outputSchema: searchProductsOutput,
      annotations: readOnly,
    },
    (input) =>
      answerIf("products:read", async () => {
        const found = await data.searchProducts(input);
        return found.products.length > 0 ? found : { ...found, hint: searchHint(input, found.truncated) };
      }),
  );
  tools.get_product = server.registerTool(
    "get_product",
    {
      description:
        "One product with all its offers and summary, by id (`id` or `product_id`, the same) or by SKU (give exactly one), as GET /products/{id} gives it: total and " +
        "unit prices, seller, condition, check_status and the 30-day lowest price; with `currency`, each offer's converted price.",
      inputSchema: getProductInput,
      outputSchema: getProductOutput,
      annotations: readOnly,
    },
    (input) => answerIf("products:read", () => data.getProduct(productWanted(input))),
  );
  tools.price_history = server.registerTool(
    "price_history",
    {
      description:
        "A product's price history, oldest first (as GET /products/{id}/history), optionally downsampled to a number of points per " +
        "competitor.",
      inputSchema: priceHistoryInput,
      outputSchema: priceHistoryOutput,
      annotations: readOnly,
    },
    (input) =>
      answerIf("history:read", async () => {
        if (input.from !== undefined && input.to !== undefined && input.from >= input.to)
          throw new ApiError(400, "to: must be later than from");
        return priceHistoryOf(data.history, input);
      }),
  );
  tools.list_competitors = server.registerTool(
    "list_competitors",
    {
      description: "Every competitor with its id, name, domain and offer count.",
      inputSchema: {},
      outputSchema: listCompetitorsOutput,
      annotations: readOnly,
    },
    () => answerIf("products:read", async () => ({ competitors: (await data.competitors()).list })),
  );
  tools.recent_changes = server.registerTool(
    "recent_changes",
    {
      description:
        "Price and stock changes since an instant (the last 24 hours by default), newest first, each as GET /events gives it; pass " +
        "a page's next_cursor as `after` for the next page, of older changes, down to `since` (then next_cursor is null; a cursor " +
        "older than 30 days is refused: start again with `since`).",
      inputSchema: recentChangesInput,
      outputSchema: recentChangesOutput,
      annotations: readOnly,
    },
    (input) => answerIf("events:read", () => data.feed(recentChangesQuery(input), { newestFirst: true })),
  );
  listToolsPortably(server, tools);
  // A new server for each request, whose tools never change while it lives: nothing to announce (the SDK offers it by default).
  server.server.registerCapabilities({ tools: { listChanged: false } });
  return server;
}
