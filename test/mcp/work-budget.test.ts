import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { HOUR_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { createCompetitor, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call } from "../helpers/http.ts";
import { type Cost, costOf, type Statement, statementsOf } from "../helpers/statements.ts";
import { installReceiver } from "../helpers/webhook-receiver.ts";

/**
 * Every MCP tool's work follows what it returns, not the data: each tool is called (raw JSON-RPC through
 * the worker, as any client's request) with 2,000 and then 20,000 products, history rows and events, and
 * each D1 statement it makes must read at most 2 × the rows it returns + 25 (the rule of
 * test/platform/rows-read.test.ts), in as many statements at either size.
 */

const SIZES = [2_000, 20_000] as const;
const ago = (hours: number) => new Date(Date.now() - hours * HOUR_MS).toISOString();
/** Rows generated inside D1 (a recursive CTE), numbered from `from` + 1 to `to`. */
const generate = (from: number, to: number, insert: string) =>
  env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT ${from + 1} UNION ALL SELECT i + 1 FROM n WHERE i < ${to}) ${insert}`).run();

/** A whole price.changed payload of event i at t, in SQL (recent_changes' answers are checked against the document's shape). */
const PAYLOAD = `json_object('type', 'price.changed', 'timestamp', t, 'data', json_object('event_id', printf('evt_%032x', i),
  'product_id', printf('prd_wb%06d', i), 'sku', printf('WB-%06d', i), 'name', 'Widget ' || i, 'competitor_id', 'cmp_wb_all',
  'competitor_name', 'Everything', 'url', NULL, 'currency', 'USD', 'observed_at', t, 'old_price', '11.00', 'new_price', '10.00',
  'change_abs', '-1.00', 'change_pct', -9.09, 'direction', 'down'))`;

/**
 * The catalogue at `size`: products `prd_wb<i>` named "Widget <i>" (so "widget" is a trigram every one
 * holds) over 40 brands and 10 categories, each offered by cmp_wb_all, one of them by cmp_wb_one too;
 * another product's history of size / 10 rows beside ours; size events, one in ten an account's own. The products' insert trigger fills the text index (migrations/0013_products_search.sql).
 */
async function grow(from: number, to: number) {
  await generate(
    from,
    to,
    `INSERT INTO products (id, sku, name, brand, category) SELECT printf('prd_wb%06d', i), printf('WB-%06d', i), 'Widget ' || i, 'Brand' || (i % 40), 'Cat' || (i % 10) FROM n`,
  );
  await generate(
    from,
    to,
    `INSERT INTO offers (product_id, competitor_id, price_minor, currency, in_stock) SELECT printf('prd_wb%06d', i), 'cmp_wb_all', 1000 + i, 'USD', 1 FROM n`,
  );
  await generate(
    from / 10,
    to / 10,
    `INSERT INTO price_history (product_id, competitor_id, price_minor, currency, in_stock, observed_at) SELECT 'prd_wb000002', 'cmp_wb_all', i, 'USD', 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d minutes', i)) FROM n`,
  );
  // Newest first in number, so older events get lower seqs (commit order follows time), 10 s apart as in rows-read.test.ts:
  // reading `since` through the timestamp index costs a minute of events (COMMIT_SKEW_MS), whatever the total.
  await generate(
    from,
    to,
    `INSERT INTO events (seq, id, type, timestamp, payload, created_at, fanned_out_at, account_id) SELECT 1000000 - i, printf('evt_%032x', i), 'price.changed', t, ${PAYLOAD}, t, t, CASE WHEN i % 10 = 0 THEN 'acct_wb_other' END FROM (SELECT i, strftime('%Y-%m-%dT%H:%M:%fZ', '${ago(0.1)}', printf('-%d seconds', 10 * i)) AS t FROM n)`,
  );
}

let key: string;

beforeAll(async () => {
  installReceiver();
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_wb_all", name: "Everything" });
  await createCompetitor({ id: "cmp_wb_one", name: "Just one" });
  await grow(0, SIZES[0]);
  await env.DB.prepare(
    "INSERT INTO offers (product_id, competitor_id, price_minor, currency, in_stock) VALUES ('prd_wb000777', 'cmp_wb_one', 5, 'USD', 1)",
  ).run();
  await env.DB.prepare(
    `INSERT INTO price_history (product_id, competitor_id, price_minor, currency, in_stock, observed_at)
     SELECT 'prd_wb000001', 'cmp_wb_all', 100 + value, 'USD', 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d hours', value)) FROM json_each('[1,2,3,4,5,6,7,8,9,10,11,12]')`,
  ).run();
  await publishSnapshot();
  await toolCall("list_competitors", {}); // the key's first use, and the isolate's first manifest read, are not a tool's work
});

async function toolCall(name: string, args: Record<string, unknown>) {
  const response = await call("POST", "/mcp", {
    token: key,
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { result: { isError?: boolean; structuredContent?: Record<string, unknown> } }).result;
}

const TOOL_CALLS: [string, string, Record<string, unknown>][] = [
  ["search_products, a 2-character query", "search_products", { query: "wi" }],
  ["search_products, a trigram every product holds", "search_products", { query: "widget" }],
  ["search_products, a rare text", "search_products", { query: "widget 777" }],
  ["search_products, one competitor's single offer", "search_products", { competitor: "cmp_wb_one" }],
  ["search_products, a competitor offering everything", "search_products", { competitor: "cmp_wb_all", limit: 100 }],
  ["search_products, brand", "search_products", { brand: "BRAND7" }],
  ["search_products, category", "search_products", { category: "cat3", limit: 50 }],
  ["search_products, sku", "search_products", { sku: "WB-000042" }],
  ["search_products, brand and category", "search_products", { brand: "brand3", category: "cat3" }],
  ["search_products, text and competitor", "search_products", { query: "widget", competitor: "cmp_wb_one" }],
  ["get_product by id", "get_product", { id: "prd_wb000777" }],
  ["get_product by sku", "get_product", { sku: "WB-000777" }],
  ["price_history", "price_history", { product_id: "prd_wb000001" }],
  ["price_history with points, beside a long history", "price_history", { product_id: "prd_wb000001", points: 4 }],
  ["price_history with points, of the long history", "price_history", { product_id: "prd_wb000002", points: 4 }],
  ["list_competitors", "list_competitors", {}],
  ["recent_changes", "recent_changes", {}],
  ["recent_changes, since an instant", "recent_changes", { since: ago(10), limit: 50 }],
  // A catalogue event's id (every tenth is another account's, which a cursor may not name: 410 as unknown).
  ["recent_changes, after a cursor", "recent_changes", { after: `evt_${(1501).toString(16).padStart(32, "0")}`, limit: 100 }],
];

interface Work {
  statements: number;
  costs: (Cost & { keys: number })[];
}

/** The keys a statement looks up as a list of parameters (`IN (?, ?, …)`), as the offers of the products found are. */
const keysOf = ({ sql, params }: Statement) => (/ in \(\?/i.test(sql) ? params.length : 0);

async function workOf(name: string, args: Record<string, unknown>): Promise<Work> {
  const statements = await statementsOf(async () => {
    const result = await toolCall(name, args);
    // A 2-character query is refused before any read; every other call answers.
    expect(result.isError ?? false, JSON.stringify(result)).toBe(args.query === "wi");
  });
  const reads = statements.filter((statement) => /^\s*select/i.test(statement.sql));
  const costs = await costOf(reads);
  return { statements: statements.length, costs: costs.map((cost, i) => ({ ...cost, keys: keysOf(reads[i]!) })) };
}

/**
 * Each statement reads at most 2 × the rows it returns + 25. A statement looking up a list of keys pays for each
 * key, found or not (its id and an index seek): at most the rows it returns + 2 × its keys + 25, its keys being
 * at most the tool's limit.
 */
function expectRowsFollowResults(what: string, { costs }: Work) {
  for (const cost of costs)
    expect(cost.rowsRead, `${what}\n${cost.sql}\n${cost.plan.join("\n")}`).toBeLessThanOrEqual(
      Math.max(2 * cost.rowsReturned, cost.rowsReturned + 2 * cost.keys) + 25,
    );
}

const measured = new Map<string, Work>();

describe(`MCP tools' work at ${SIZES[0]} products`, () => {
  it.each(TOOL_CALLS)("%s", async (what, name, args) => {
    const work = await workOf(name, args);
    measured.set(what, work);
    expectRowsFollowResults(what, work);
  });
});

describe(`MCP tools' work at ${SIZES[1]} products: as many statements as at ${SIZES[0]}`, () => {
  beforeAll(() => grow(SIZES[0], SIZES[1]));

  it.each(TOOL_CALLS)("%s", async (what, name, args) => {
    const work = await workOf(name, args);
    expectRowsFollowResults(what, work);
    expect(work.statements, what).toBe(measured.get(what)?.statements);
  });
});
