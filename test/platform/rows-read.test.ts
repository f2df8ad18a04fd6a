import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { archiveEvents } from "../../src/events/archive.ts";
import { D1_ROUND_TRIPS_PER_FEED_PAGE, D1_ROUND_TRIPS_PER_HISTORY_READ } from "../../src/events/retention.ts";
import { database } from "../../src/platform/db.ts";
import { HOUR_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, expectJson, workCounts } from "../helpers/http.ts";
import { type Cost, costOf, statementsOf } from "../helpers/statements.ts";
import { accountToken } from "../helpers/tokens.ts";
import { hookUrl, installReceiver } from "../helpers/webhook-receiver.ts";
import { createWebhook } from "../helpers/webhooks.ts";

/**
 * Every query a client can trigger reads an index range, not the table: on tables holding thousands of
 * rows that are not the caller's (older events, other products' history, other webhooks' deliveries,
 * other accounts' keys and webhooks), each statement's `meta.rows_read` stays near the rows it returns.
 */

const MANY = 2000;
const ago = (hours: number) => new Date(Date.now() - hours * HOUR_MS).toISOString();
/** Rows generated inside D1 (a recursive CTE), so a few thousand cost one statement. */
const generate = (count: number, insert: string) =>
  env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count}) ${insert}`).run();

let key: string;
let login: string;
let hookId: string;
let recent: string[];

beforeAll(async () => {
  installReceiver();
  key = (await freshAccount({ plan: "premium" })).key;
  login = await accountToken(`rows-read-${Date.now()}`);
  // Events: one archived object, MANY in D1 (one each 10 s) older than the `since` asked for, and a few recent ones.
  await commitEvents(50, 20);
  await archiveEvents(database(env.DB), env.ARCHIVE);
  await generate(
    MANY,
    `INSERT INTO events (id, type, timestamp, payload, created_at, fanned_out_at) SELECT printf('evt_%032x', i), 'price.changed', t, '{"type":"price.changed","timestamp":"' || t || '","data":{}}', t, t FROM (SELECT i, strftime('%Y-%m-%dT%H:%M:%fZ', '${ago(20)}', printf('-%d seconds', 10 * i)) AS t FROM n)`,
  );
  recent = await commitEvents(1, 5);
  // History: another product's MANY rows beside ours.
  await createCompetitor({ id: "cmp_rows", name: "Rows" });
  await createProduct({ id: "prd_ours", sku: "OURS" });
  await createProduct({ id: "prd_busy", sku: "BUSY" });
  await addHistory(
    "prd_ours",
    [1, 2, 3].map((i) => ({ competitor: "cmp_rows", price: `${i}.00`, observedAt: ago(i) })),
  );
  await generate(
    MANY,
    `INSERT INTO price_history (product_id, competitor_id, price_minor, currency, in_stock, observed_at) SELECT 'prd_busy', 'cmp_rows', i, 'USD', 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d minutes', i)) FROM n`,
  );
  // Other accounts' keys and webhooks, and another webhook's deliveries.
  await generate(MANY, `INSERT INTO accounts (id) SELECT printf('other-%d', i) FROM n`);
  await generate(
    MANY,
    `INSERT INTO api_keys (id, account_id, name, prefix, key_hash) SELECT printf('key_other%d', i), printf('other-%d', i), 'k', 'pda_x', printf('%064x', i) FROM n`,
  );
  await generate(
    MANY,
    `INSERT INTO webhooks (id, account_id, url, events, secret_ciphertext) SELECT printf('whk_other%d', i), printf('other-%d', i), 'https://hooks.test/x', '["price.changed"]', 'v1.x.y' FROM n`,
  );
  hookId = (await createWebhook(login, { url: hookUrl() })).id;
  await generate(
    MANY,
    `INSERT INTO webhook_deliveries (event_id, webhook_id, type, attempt, duration_ms, outcome, delivered_at) SELECT printf('evt_%032x', i), 'whk_other1', 'price.changed', 1, 5, 'delivered', '${ago(1)}' FROM n`,
  );
  await publishSnapshot();
  vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
});

/** The costs of the D1 reads one request makes, after checking it answered `status`. */
async function readsOf(method: string, path: string, token: string, body?: unknown, status = 200): Promise<Cost[]> {
  let response: Response | undefined;
  const statements = await statementsOf(async () => {
    response = await call(method, path, { token, body });
  });
  await expectJson(response!, status);
  return costOf(statements);
}

describe("rows read by client-triggered queries", () => {
  it.each([
    ["GET /events?since= (MANY older rows in D1)", () => readsOf("GET", `/events?since=${encodeURIComponent(ago(2))}`, key)],
    ["GET /events?after= (a recent cursor)", () => readsOf("GET", `/events?after=${recent[0]}`, key)],
    ["GET /events?type= from the start (archive, then D1)", () => readsOf("GET", `/events?type=stock.changed&limit=5`, key)],
    [
      "GET /events?since=&type=",
      () => readsOf("GET", `/events?since=${encodeURIComponent(ago(30))}&type=stock.changed&type=price.changed&limit=3`, key),
    ],
    ["GET /products/:id/history (another product's MANY rows)", () => readsOf("GET", "/products/prd_ours/history", key)],
    ["POST /webhooks/:id/replay", () => readsOf("POST", `/webhooks/${hookId}/replay`, login, { since: ago(2) }, 202)],
    ["GET /webhooks/:id/deliveries (another webhook's MANY)", () => readsOf("GET", `/webhooks/${hookId}/deliveries`, login)],
    ["GET /webhooks (other accounts' MANY)", () => readsOf("GET", "/webhooks", login)],
    ["GET /api-keys (other accounts' MANY)", () => readsOf("GET", "/api-keys", login)],
    ["GET /competitors", () => readsOf("GET", "/competitors", key)],
  ])("%s", async (_what, request) => {
    const costs = await request();
    for (const cost of costs) {
      // An index range: a few rows of lookups beside what it returns, never the MANY.
      expect(cost.rowsRead, `${cost.sql}\n${cost.plan.join("\n")}`).toBeLessThanOrEqual(2 * cost.rowsReturned + 25);
      for (const step of cost.plan)
        expect(step, cost.sql).not.toMatch(/^SCAN (events|price_history|webhook_deliveries|api_keys|webhooks)\b(?!.*USING)/);
    }
  });
});

describe("D1 round trips, as npm run simulate counts them (src/events/retention.ts)", () => {
  it("a feed page with a cursor, and a history read", async () => {
    await call("GET", "/events?limit=1", { token: key }); // the key's first use reads it from D1, once
    const page = await call("GET", `/events?after=${recent[0]}`, { token: key });
    expect(page.status).toBe(200);
    expect(workCounts(page).d1).toBe(D1_ROUND_TRIPS_PER_FEED_PAGE);
    const history = await call("GET", "/products/prd_ours/history", { token: key });
    expect(history.status).toBe(200);
    expect(workCounts(history).d1).toBe(D1_ROUND_TRIPS_PER_HISTORY_READ);
  });
});
