import { createScheduledController, runDurableObjectAlarm } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import type { EventMessage } from "../../src/events/messages.ts";
import { eventMessageOf } from "../../src/events/outbox.ts";
import worker from "../../src/index.ts";
import { database } from "../../src/platform/db.ts";
import { newEventId } from "../../src/platform/ids.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { events } from "../../src/platform/tables.ts";
import { publishToStreams } from "../../src/stream/publish.ts";
import { DELIVERY_ARCHIVE_CRON } from "../../src/webhooks/delivery/delivery-archive.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { createCompetitor, createProduct, insertProducts, publishCatalogue, randomProductId } from "../helpers/catalogue-factory.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, randomTestIp, type WorkCountField } from "../helpers/http.ts";
import { fetchDocument, METHODS } from "../helpers/openapi.ts";
import { found, report } from "../helpers/secret-scanning.ts";
import { type Cost, costOf, statementsOf } from "../helpers/statements.ts";
import { adminToken } from "../helpers/tokens.ts";
import { hookUrl, installReceiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, endpointSettled, ingest, runQueue } from "../helpers/webhooks.ts";
import { invocationLog } from "../helpers/work-log.ts";

/**
 * A work budget per invocation that every route, MCP tool, the stream, a fan-out batch, a webhook endpoint object's
 * run, the stream hubs' publish and each cron task joins: the D1 statements it makes, the rows each read statement reads and the R2 reads, measured at two data sizes
 * (SIZES products, events, price points, other accounts' keys and webhooks), each held under a stated budget that
 * is the same at both sizes. A read statement may read at most 3 × the rows it returns + 25 (an index range, not a
 * scan). Measured at the bindings (D1 and R2 spied in the isolate the worker shares with the test), so work done
 * in waitUntil or inside a handler's helpers counts too. The budget table is checked against the OpenAPI document
 * and the MCP tool list: a route or tool added later without a budget fails "every operation has a budget".
 */

const SIZES = [2_000, 20_000] as const;
/**
 * A budget: the most D1 statements and R2 reads (get, head) one invocation may make at any size. `rowsRead`, where
 * given, caps the rows all its statements read together instead of the rule per statement (a fan-out's candidate
 * query reads a few rows a question, whatever it finds).
 */
interface Budget {
  statements: number;
  r2Reads: number;
  rowsRead?: number;
}
const budget = (statements: number, r2Reads = 0, rowsRead?: number): Budget => ({ statements, r2Reads, rowsRead });
/** One product from the snapshot: the snapshot's pointer and manifest (at most once a second an isolate), and one range. */
const SNAPSHOT_PRODUCT_READS = 3;
/**
 * A filtered read from the snapshot, cold (src/catalogue/filtered.ts): the pointer and manifest, the filter directory,
 * the part indexes of the segments it names (one range here) and the parts that may match (one here). No D1.
 */
const SNAPSHOT_FILTER_READS = 5;

interface Measured {
  statements: number;
  r2Reads: number;
  costs: Cost[];
}

/**
 * What `run` costs. Its D1 statements (with the rows each reads, re-run for `meta.rows_read`) and R2 reads are seen
 * at the bindings, which every invocation in this isolate shares: right for a queue batch or a cron run called
 * here, and for a response that keeps working after its headers (a stream). A request that returns its response is
 * counted by its final tally instead (its log line: its body's work and its work after the answer included), so a
 * builder alarm or a queue batch running meanwhile is not charged to it.
 */
async function measure(run: () => Promise<Response | undefined>): Promise<Measured> {
  let r2Reads = 0;
  const spies = [env.ARCHIVE, env.CATALOGUE].flatMap((bucket) =>
    (["get", "head"] as const).map((method) => {
      const real = bucket[method].bind(bucket) as (...args: unknown[]) => unknown;
      return vi.spyOn(bucket, method).mockImplementation(((...args: unknown[]) => {
        r2Reads++;
        return real(...args);
      }) as never);
    }),
  );
  try {
    const log = invocationLog();
    let meter: Record<WorkCountField, number> | undefined;
    const statements = await statementsOf(async () => {
      const res = await run();
      if (res) meter = await log.finalTally(res);
    });
    const costs = await costOf(statements);
    if (!meter) return { statements: statements.length, r2Reads, costs };
    return { statements: meter["d1-statements"]!, r2Reads: meter["r2-b"]!, costs };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

// ---- The data, grown from one size to the next -------------------------------------------------------------------

const generate = (count: number, insert: string) =>
  env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count}) ${insert}`).run();
/** Another account's alert rules, about 2 KB each: what a fan-out must not read. */
const OTHERS_FILTERS = JSON.stringify({ skus: Array.from({ length: 60 }, (_, i) => `NOT-OURS-${i}-${"x".repeat(20)}`) });

let grown = 0;
/** When this size's 600 windowed price changes began: the span the windowed replay asks for. */
let windowSince = "";
/**
 * Grows every table to `size` rows as production fills it: in commit order, each new event and price point newer
 * than what is stored (so seq and time agree), then a few hundred real price changes through ingestion (the windowed
 * replay's events), then the snapshot.
 */
async function growTo(size: number) {
  const add = size - grown;
  const from = grown;
  for (let done = 0; done < add; done += 1000) await insertProducts(from + done, Math.min(1000, add - done), 0, randomProductId);
  const latest = await env.DB.prepare("SELECT max(timestamp) AS t FROM events").first<string | null>("t");
  const start = Date.parse(latest ?? new Date(Date.now() - 20 * 3_600_000).toISOString()) + 1;
  const stepMs = (Date.now() - 1000 - start) / add; // spread between the newest stored event and a second ago
  const at = (column: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', (${start} + i * ${stepMs}) / 1000.0, 'unixepoch') AS ${column}`;
  // Price changes of the bulk products, each shaped as ingestion writes it (src/observations/events.ts).
  await generate(
    add,
    `INSERT INTO events (id, type, timestamp, payload, old_minor, new_minor, created_at, fanned_out_at)
     SELECT id, 'price.changed', t, json_object('type', 'price.changed', 'timestamp', t, 'data', json_object(
         'event_id', id, 'product_id', printf('prd_bulk%d', k), 'sku', printf('SNAP-%d', k), 'name', printf('Snapshot product %d ☕', k),
         'competitor_id', 'cmp_a', 'competitor_name', 'A', 'url', NULL, 'currency', 'USD', 'old_price', '12.00', 'new_price', '11.50',
         'change_abs', '-0.50', 'change_pct', -4.17, 'direction', 'down', 'observed_at', t)), 1200, 1150, t, t
     FROM (SELECT printf('evt_%032x', ${from} + i) AS id, ${from} + i AS k, ${at("t")} FROM n)`,
  );
  await generate(
    add,
    `INSERT INTO price_history (product_id, competitor_id, price_minor, currency, in_stock, observed_at)
     SELECT 'prd_budget_busy', 'cmp_a', i, 'USD', 1, t FROM (SELECT i, ${at("t")} FROM n)`,
  );
  await generate(add, `INSERT INTO accounts (id) SELECT printf('budget-other-%d', ${from} + i) FROM n`);
  await generate(
    add,
    `INSERT INTO api_keys (id, account_id, name, prefix, key_hash)
     SELECT printf('key_budget%d', ${from} + i), printf('budget-other-%d', ${from} + i), 'k', 'pda_x', printf('%064x', ${from} + i) FROM n`,
  );
  await generate(
    add,
    `INSERT INTO webhooks (id, account_id, url, events, filters, secret_ciphertext)
     SELECT printf('whk_budget%d', ${from} + i), printf('budget-other-%d', ${from} + i), 'https://hooks.test/other', '["price.changed","stock.changed"]', '${OTHERS_FILTERS}', 'v1.x.y' FROM n`,
  );
  grown = size;
  await growOverlay(size / 40);
  // Price changes of the last minutes for the windowed replay: each asks for its offer's prior prices.
  windowSince = new Date().toISOString();
  for (let round = 0; round < 3; round++)
    await ingest(Array.from({ length: 200 }, (_, k) => ({ sku: `BUDGET-WIN-${k}`, price: `${100 - round * 10 - (k % 7)}.${size % 97}` })));
  await publishCatalogue();
  await settle();
}

let overlaid = 0;
/**
 * The owner's own sandbox changes, through POST /test/observations: `count` sandbox products changed (50 at the smaller
 * size, 500 at the larger), each with a history row and an event, so its test key's reads meet a small and a large
 * overlay.
 */
async function growOverlay(count: number) {
  const { products } = await (await call("GET", "/products", { token: sandboxKey })).json<{ products: SandboxProduct[] }>();
  for (let start = overlaid; start < count; start += 100) {
    const observations = products.slice(start, Math.min(count, start + 100)).map(({ sku, offers: [offer] }) => ({
      sku,
      name: "x",
      competitor: { id: offer!.competitor_id, name: "x" },
      price: offer!.currency === "JPY" ? "12340" : "123.40",
      currency: offer!.currency,
      in_stock: true,
    }));
    const res = await call("POST", "/test/observations", { token: sandboxKey, body: { observations } });
    expect(res.status, await res.clone().text()).toBe(200);
  }
  overlaid = count;
}
interface SandboxProduct {
  id: string;
  sku: string;
  offers: { competitor_id: string; currency: string }[];
}

/**
 * Lets the work other invocations left behind finish before a measurement counted at the bindings: the catalogue
 * builder's pending alarm (an ingestion's poke) runs now, then the test waits for a second in which D1 sees no
 * statement (queue batches of earlier deliveries, objects' alarms).
 */
async function settle() {
  await runDurableObjectAlarm(catalogueBuilder(env));
  let seen = 0;
  const prepare = env.DB.prepare.bind(env.DB);
  const spy = vi.spyOn(env.DB, "prepare").mockImplementation((sql: string) => {
    seen++;
    return prepare(sql);
  });
  try {
    for (let quiet = false, waited = 0; !quiet && waited < 30; waited++) {
      const before = seen;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      quiet = seen === before;
    }
  } finally {
    spy.mockRestore();
  }
}

// ---- Who calls, and what --------------------------------------------------------------------------------------------

let admin: string;
let owner: Awaited<ReturnType<typeof freshAccount>>;
let hookId: string;
let windowHookId: string;
/** The hubs' publish entry's streams' key: the owner's own key has spent its minute on the routes by then. */
let streamKey: string;
let productId: string;
/** The owner's test key (a fresh one per size: a test key has the standard plan's 60 a minute), and a sandbox product. */
let sandboxKey: string;
let sandboxProductId: string;
const OURS = "BUDGET-OURS";
let priceChanges = 10;

/** A fresh key of the owner's for a call that uses one up (rotate, revoke). */
const spareKey = async () => (await addKey(owner.token)).id;
const spareHook = async () => (await createWebhook(owner.token, { url: hookUrl("budget-spare") })).id;

/**
 * One invocation of each route, as a client makes it, with what the route needs made beforehand (not measured).
 * It hands back its response, whose meter counts it, unless the response streams (its work goes on after its
 * headers, so the bindings count it).
 */
type Invocation = () => Promise<() => Promise<Response | undefined>>;
const route =
  (method: string, path: () => string | Promise<string>, token: () => string, body?: () => unknown, streams = false): Invocation =>
  async () => {
    const url = await path();
    return async () => {
      const res = await call(method, url, { token: token(), body: body?.() });
      expect(res.status, `${method} ${url}: ${await res.clone().text()}`).toBeLessThan(300);
      await res.arrayBuffer();
      return streams ? undefined : res;
    };
  };
const key = () => owner.key;
const testKey = () => sandboxKey;
const login = () => owner.token;
const adminLogin = () => admin;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

const ROUTES: Record<string, [Invocation, Budget]> = {
  "GET /products": [route("GET", () => "/products", key, undefined, true), budget(0, 4)],
  "GET /products?sku=": [route("GET", () => `/products?sku=${OURS}`, key, undefined, true), budget(0, SNAPSHOT_FILTER_READS)],
  "GET /products?updated_since=": [
    route("GET", () => `/products?updated_since=${encodeURIComponent(ago(0))}`, key, undefined, true),
    budget(0, SNAPSHOT_FILTER_READS),
  ],
  // From the snapshot: the range of its segment that holds it, and the pointer and manifest when this isolate last
  // read them over a second ago (src/catalogue/snapshot/product-read.ts); never D1.
  "GET /products/{id}": [route("GET", () => `/products/${productId}`, key), budget(0, SNAPSHOT_PRODUCT_READS)],
  // ?currency= reads the day's rates from the isolate's copy (a small R2 read at most once a second); the rates here
  // were written straight into D1, so the first converted read publishes them from D1 (one statement), as the first
  // after a deployment does. Warm, none (test/catalogue/currency.test.ts).
  "GET /products?sku=&currency=": [
    route("GET", () => `/products?sku=${OURS}&currency=EUR`, key, undefined, true),
    budget(1, SNAPSHOT_FILTER_READS + 1),
  ],
  "GET /products/{id}?currency=": [route("GET", () => `/products/${productId}?currency=JPY`, key), budget(1, SNAPSHOT_PRODUCT_READS + 1)],
  // A test key's reads: its account's overlay (one call to its sandbox object, no D1), laid over the base the isolate
  // generates; no R2. A conversion reads its rate.
  "GET /products (test key)": [route("GET", () => "/products", testKey, undefined, true), budget(0)],
  "GET /products?sku= (test key)": [route("GET", () => "/products?sku=TEST-CF-0001", testKey, undefined, true), budget(0)],
  "GET /products?sku=&currency= (test key)": [
    route("GET", () => "/products?sku=TEST-CF-0001&currency=EUR", testKey, undefined, true),
    budget(1),
  ],
  "GET /products/{id} (test key)": [route("GET", () => `/products/${sandboxProductId}`, testKey), budget(0)],
  "GET /products/{id}/history": [route("GET", () => `/products/${productId}/history`, key), budget(4, 2)],
  "GET /products/{id}/history (test key)": [route("GET", () => `/products/${sandboxProductId}/history`, testKey), budget(0)],
  "GET /competitors": [route("GET", () => "/competitors", key), budget(3)],
  "GET /competitors (test key)": [route("GET", () => "/competitors", testKey), budget(0)],
  "GET /events": [route("GET", () => "/events", key), budget(6, 2)],
  "GET /events (test key)": [route("GET", () => "/events", testKey), budget(0)],
  // Ten sandbox products changed in the account's object (no D1), and the first delivery after the answer (its final
  // tally): the account's test webhooks read from D1.
  "POST /test/observations": [
    route(
      "POST",
      () => "/test/observations",
      testKey,
      () => ({
        observations: Array.from({ length: 10 }, (_, k) => ({
          sku: `TEST-SP-${String(4 + 8 * k).padStart(4, "0")}`,
          name: "x",
          competitor: { id: "test_harbor", name: "x" },
          price: `${++priceChanges}.00`,
          currency: "USD",
          in_stock: true,
        })),
      }),
    ),
    budget(1),
  ],
  "GET /events?since=": [route("GET", () => `/events?since=${encodeURIComponent(ago(3_600_000))}`, key), budget(6, 2)],
  "GET /account/events": [route("GET", () => "/account/events", login), budget(6, 2)],
  "GET /account": [route("GET", () => "/account", login), budget(3)],
  "GET /account/usage": [route("GET", () => "/account/usage?granularity=hour", login), budget(4)],
  "GET /api-keys": [route("GET", () => "/api-keys", login), budget(3)],
  "POST /api-keys": [
    route(
      "POST",
      () => "/api-keys",
      login,
      () => ({ name: "budget" }),
    ),
    budget(6),
  ],
  "POST /api-keys/{id}/rotate": [
    route(
      "POST",
      async () => `/api-keys/${await spareKey()}/rotate`,
      login,
      () => ({}),
    ),
    budget(8),
  ],
  "GET /api-keys/{id}/usage": [route("GET", () => `/api-keys/${owner.keyId}/usage?granularity=hour`, login), budget(3)],
  "DELETE /api-keys/{id}": [route("DELETE", async () => `/api-keys/${await spareKey()}`, login), budget(6)],
  "PATCH /api-keys/{id}": [
    route(
      "PATCH",
      () => `/api-keys/${owner.keyId}`,
      login,
      () => ({ name: "renamed" }),
    ),
    budget(6),
  ],
  "GET /webhooks": [route("GET", () => "/webhooks", login), budget(3)],
  "POST /webhooks": [
    route(
      "POST",
      () => "/webhooks",
      login,
      () => ({ url: hookUrl("budget-new") }),
    ),
    budget(6),
  ],
  "GET /webhooks/{id}": [route("GET", () => `/webhooks/${hookId}`, login), budget(3)],
  "DELETE /webhooks/{id}": [route("DELETE", async () => `/webhooks/${await spareHook()}`, login), budget(6)],
  "PATCH /webhooks/{id}": [
    route(
      "PATCH",
      () => `/webhooks/${hookId}`,
      login,
      () => ({ description: "budget" }),
    ),
    budget(6),
  ],
  "POST /webhooks/{id}/test": [route("POST", () => `/webhooks/${hookId}/test`, login), budget(4)],
  "POST /webhooks/{id}/rotate-secret": [
    route(
      "POST",
      () => `/webhooks/${hookId}/rotate-secret`,
      login,
      () => ({}),
    ),
    budget(4),
  ],
  // Replays of this size's 600 price changes of 200 products (the same span at each size). A replay reads its span
  // page by page and finds the span's first event among one minute of the events' time index, so its rows are capped
  // in total. With new_low_days: 30 every window is asked per page, never per event, and each product's archived years
  // are read once (2 objects a product: the window's year and the one before).
  "POST /webhooks/{id}/replay": [
    route(
      "POST",
      () => `/webhooks/${hookId}/replay`,
      login,
      () => ({ since: windowSince }),
    ),
    budget(12, 4, 3000),
  ],
  "POST /webhooks/{id}/replay (new_low_days)": [
    route(
      "POST",
      () => `/webhooks/${windowHookId}/replay`,
      login,
      () => ({ since: windowSince }),
    ),
    budget(12, 2 * 200, 5000),
  ],
  "GET /webhooks/{id}/deliveries": [route("GET", () => `/webhooks/${hookId}/deliveries`, login), budget(4, 2)],
  "PUT /admin/accounts/{id}/plan": [
    route(
      "PUT",
      () => `/admin/accounts/${owner.sub}/plan`,
      adminLogin,
      () => ({ plan: "premium" }),
    ),
    budget(4),
  ],
  "POST /admin/observations": [
    route(
      "POST",
      () => "/admin/observations",
      adminLogin,
      () => ({
        observations: [
          {
            sku: OURS,
            name: "Ours",
            competitor: { id: "cmp_a", name: "A" },
            price: `${++priceChanges}.00`,
            currency: "USD",
            in_stock: true,
          },
        ],
      }),
    ),
    // Its final tally: the work after its answer (the stream hubs' publish, the first delivery, whose rules may look
    // back into the archive) included. Rows read in all, as for a fan-out: its candidate query reads a few rule rows a
    // question (36 for 3 webhooks found at both sizes), whatever other accounts hold.
    budget(15, 2, 600),
  ],
  "PATCH /admin/competitors/{id}": [
    route(
      "PATCH",
      () => "/admin/competitors/cmp_a",
      adminLogin,
      () => ({ name: "A" }),
    ),
    budget(4, 2),
  ],
  "PUT /admin/fx-rates": [
    route(
      "PUT",
      () => "/admin/fx-rates",
      adminLogin,
      () => ({ base: "EUR", date: new Date().toISOString().slice(0, 10), rates: { USD: "1.0832", JPY: "162.45", KWD: "0.3331" } }),
    ),
    // Then published to R2 for the converted reads: the days it needs read (one statement), the object's etag (one R2 read).
    budget(5, 1),
  ],
  "POST /secret-scanning/github": [
    async () => {
      const leaked = await addKey(owner.token);
      return async () => {
        const res = await report([found(leaked.key)]);
        expect(res.status).toBe(200);
        return res;
      };
    },
    budget(8, 0, 400),
  ],
  "GET /events/stream": [
    async () => async () => {
      // Opened with no cursor: its admission (the key's object may read the key), its opening reads (the key's expiry,
      // where the present is), then idle: nothing at all.
      const stream = await openStream(owner.key);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await stream.cancel();
      return undefined;
    },
    budget(4),
  ],
};

/** A stream of the owner's, open once its first frame has come; `query` its rules. */
async function openStream(key: string, query = "") {
  const res = await exports.default.fetch(
    new Request(`https://api.test/events/stream${query}`, {
      headers: { Authorization: `Bearer ${key}`, "CF-Connecting-IP": randomTestIp() },
    }),
  );
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  let text = "";
  while (!text.includes(": connected")) text += new TextDecoder().decode((await reader.read()).value);
  return reader;
}

/** The MCP calls that are meant to be refused (and to cost next to nothing for it). */
const REFUSED_CALLS = new Set(["search_products (short query)"]);

const MCP_TOOLS: Record<string, [Record<string, unknown>, Budget, (() => string)?]> = {
  search_products: [{ query: "Snapshot product", limit: 20 }, budget(4)],
  "search_products (short query)": [{ query: "Sn" }, budget(4)],
  // From the snapshot: the filter's reads, and the parts holding the first 20 matches (read a few ahead).
  "search_products (competitor)": [{ competitor: "cmp_a", limit: 20 }, budget(0, SNAPSHOT_FILTER_READS + 4)],
  get_product: [{ sku: OURS }, budget(0, SNAPSHOT_FILTER_READS)],
  "get_product (currency)": [{ sku: OURS, currency: "EUR" }, budget(1, SNAPSHOT_FILTER_READS + 1)],
  "search_products (currency)": [{ query: "Snapshot product", limit: 20, currency: "EUR" }, budget(5)],
  price_history: [{ product_id: "prd_budget_busy", points: 50 }, budget(4, 2)],
  list_competitors: [{}, budget(3, 2)],
  recent_changes: [{ limit: 20 }, budget(4, 2)],
  "search_products (test key)": [{ query: "Espresso", limit: 20 }, budget(0), testKey],
  "recent_changes (test key)": [{ limit: 20 }, budget(0), testKey],
};

const BACKGROUND: Record<string, [() => Promise<undefined>, Budget]> = {
  "fan-out of a queue batch of 10 events": [
    async () => {
      const ids = await commitEvents(0, 10, { fannedOut: false });
      const rows = await database(env.DB).select().from(events).where(inArray(events.id, ids));
      await runQueue(rows.map(eventMessageOf));
      return undefined;
    },
    budget(12, 2, 400),
  ],
  "cron: sweeps (outbox, catalogue, archives, expiring keys)": [() => scheduled("* * * * *"), budget(40, 8)],
  "cron: delivery archive": [() => scheduled(DELIVERY_ARCHIVE_CRON), budget(12, 8)],
  // The queue consumer making a batch of 10 deliveries itself (src/webhooks/delivery/consumer.ts): the endpoint answers.
  "queue batch of 10 deliveries": [
    async () => {
      await runQueue(Array.from({ length: 10 }, () => deliveryTo(hookId)));
      return undefined;
    },
    budget(2), // the webhooks read once, the attempts recorded in one batch
  ],
  // A webhook's own object (src/webhooks/delivery/endpoint.ts) making 10 deliveries handed to it: its alarm's run.
  "webhook endpoint object: a run of 10 deliveries": [
    async () => {
      const handed = Array.from({ length: 10 }, () => deliveryTo(hookId));
      await env.WEBHOOK_ENDPOINT.get(env.WEBHOOK_ENDPOINT.idFromName(hookId)).accept(handed);
      await endpointSettled(hookId);
      return undefined;
    },
    budget(6),
  ],
  // The stream hubs' publish after an ingestion's commit (src/stream/publish.ts): 10 price changes of the busy product
  // to every hub, one of which holds two streams whose rules read the product (brands) and its history (new_low_days).
  // Counted with the two streams' opening reads (2 statements each); the publish itself reads the product once and
  // answers every history question of the batch together.
  "stream hubs: a publish of 10 price changes": [
    async () => {
      const streams = [await openStream(streamKey, "?new_low_days=30"), await openStream(streamKey, "?brands=Acme")];
      try {
        await publishToStreams(env, busyPriceChanges(10), new WorkMeter());
      } finally {
        for (const stream of streams) await stream.cancel();
      }
      return undefined;
    },
    budget(8, 2),
  ],
};

/** Price changes of the busy product (its history grows with the size), as an ingestion would publish them. */
function busyPriceChanges(count: number): EventMessage[] {
  const at = new Date().toISOString();
  return Array.from({ length: count }, () => {
    const id = newEventId(at);
    const data = {
      product_id: "prd_budget_busy",
      competitor_id: "cmp_a",
      currency: "USD",
      old_price: "12.00",
      new_price: "11.50",
      observed_at: at,
    };
    return { kind: "event", event: { id, type: "price.changed", timestamp: at, data }, price_change: { old_minor: 1200, new_minor: 1150 } };
  });
}

async function scheduled(cron: string): Promise<undefined> {
  await worker.scheduled(createScheduledController({ cron, scheduledTime: Date.now() }), env);
  return undefined;
}

/** The last /mcp response, whose meter counts a tool call. */
let lastMcpResponse: Response | undefined;
async function mcpClient(apiKey = owner.key): Promise<Client> {
  const client = new Client({ name: "work-budget", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("https://api.test/mcp"), {
    fetch: async (url, init) => {
      const request = new Request(url, init);
      request.headers.set("CF-Connecting-IP", randomTestIp());
      lastMcpResponse = await exports.default.fetch(request);
      return lastMcpResponse;
    },
    requestInit: { headers: { Authorization: `Bearer ${apiKey}` } },
  });
  await client.connect(transport);
  return client;
}

// ---- The measurements -----------------------------------------------------------------------------------------------

/** What each entry measured, per size: printed when a test fails, to show how it grew. */
const results = new Map<string, Measured[]>();

function expectWithin(name: string, measured: Measured, { statements, r2Reads, rowsRead }: Budget) {
  results.set(name, [...(results.get(name) ?? []), measured]);
  const sizes = results.get(name)!.map((m) => `${m.statements} statements, ${m.r2Reads} R2 reads`);
  expect(measured.statements, `${name}: D1 statements at each size: ${sizes.join(" → ")}`).toBeLessThanOrEqual(statements);
  expect(measured.r2Reads, `${name}: R2 reads at each size: ${sizes.join(" → ")}`).toBeLessThanOrEqual(r2Reads);
  if (rowsRead !== undefined) {
    const total = measured.costs.reduce((sum, cost) => sum + cost.rowsRead, 0);
    expect(total, `${name}: rows read by ${measured.costs.map((cost) => `${cost.rowsRead}: ${cost.sql}`).join("\n")}`).toBeLessThanOrEqual(
      rowsRead,
    );
    return;
  }
  for (const cost of measured.costs) {
    // A lookup by a list of ids reads the list, the index entry and the row: 3 a row returned.
    const what = `${name}: ${cost.rowsRead} rows read for ${cost.rowsReturned} returned by ${cost.sql}\n${cost.plan.join("\n")}`;
    expect(cost.rowsRead, what).toBeLessThanOrEqual(3 * cost.rowsReturned + 25);
  }
}

beforeAll(async () => {
  installReceiver();
  admin = await adminToken();
  owner = await freshAccount({ plan: "premium" });
  await createCompetitor({ id: "cmp_a", name: "A" });
  await createCompetitor({ id: "cmp_b", name: "B" });
  await createProduct({ id: "prd_budget_busy", sku: "BUDGET-BUSY" });
  await ingest([{ sku: OURS, competitor: { id: "cmp_a", name: "A" }, price: "50.00" }]);
  productId = (await env.DB.prepare("SELECT id FROM products WHERE sku = ?").bind(OURS).first<string>("id"))!;
  hookId = (await createWebhook(owner.token, { url: hookUrl("budget") })).id;
  streamKey = (await addKey(owner.token)).key;
  windowHookId = (await createWebhook(owner.token, { url: hookUrl("budget-window"), filters: { new_low_days: 30 } })).id;
  await newSandboxKey();
  sandboxProductId = (await (await call("GET", "/products?sku=TEST-CF-0001", { token: sandboxKey })).json<{ products: SandboxProduct[] }>())
    .products[0]!.id;
}, 300_000);

async function newSandboxKey() {
  const res = await call("POST", "/api-keys", { token: owner.token, body: { name: "budget sandbox", environment: "test" } });
  sandboxKey = (await res.json<{ key: string }>()).key;
}

afterAll(() => vi.restoreAllMocks());

describe("work budgets", () => {
  it("every operation and every tool has a budget", async () => {
    const doc = await fetchDocument();
    const documented = Object.entries<Record<string, unknown>>(doc.paths).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`),
    );
    const budgeted = new Set(Object.keys(ROUTES).map((name) => name.replace(/(\?| \().*$/, "")));
    expect([...budgeted].sort()).toEqual([...new Set(documented)].sort());
    const tools = (await (await mcpClient()).listTools()).tools.map((tool) => tool.name);
    expect([...new Set(Object.keys(MCP_TOOLS).map((name) => name.replace(/ .*$/, "")))].sort()).toEqual(tools.sort());
  });

  describe.each(SIZES)("at %i products, events, price points and other accounts", (size) => {
    beforeAll(async () => {
      await growTo(size);
      // A fresh key per size: the two sizes' calls together can pass the premium plan's 300 a minute.
      const fresh = await addKey(owner.token);
      owner = { ...owner, key: fresh.key, keyId: fresh.id };
      await newSandboxKey();
      expect((await call("GET", "/competitors", { token: sandboxKey, headers: { "CF-Connecting-IP": randomTestIp() } })).status).toBe(200);
      // Its object's first request reads the key from D1 once; the entries measure a key already seen.
      expect((await call("GET", "/competitors", { token: fresh.key, headers: { "CF-Connecting-IP": randomTestIp() } })).status).toBe(200);
    }, 600_000);

    it.each(Object.keys(ROUTES))("%s", async (name) => {
      const [invocation, limits] = ROUTES[name]!;
      const run = await invocation();
      // Counted at the bindings (a stream), or its rows totalled: nothing else may be running.
      if (limits.rowsRead !== undefined || name === "GET /events/stream") await settle();
      expectWithin(name, await measure(run), limits);
    });

    it.each(Object.keys(MCP_TOOLS))("MCP %s", async (name) => {
      const [args, limits, apiKey = key] = MCP_TOOLS[name]!;
      const client = await mcpClient(apiKey());
      const call = async () => {
        const result = await client.callTool({ name: name.replace(/ .*$/, ""), arguments: args });
        // A tool error costs little: each call is the answer it is meant to be (a real one, but the query too short to run).
        expect(Boolean(result.isError), `MCP ${name}: ${JSON.stringify(result).slice(0, 500)}`).toBe(REFUSED_CALLS.has(name));
        return lastMcpResponse;
      };
      expectWithin(`MCP ${name}`, await measure(call), limits);
    });

    it.each(Object.keys(BACKGROUND))("%s", async (name) => {
      const [run, limits] = BACKGROUND[name]!;
      await settle();
      expectWithin(name, await measure(run), limits);
    });
  });
});
