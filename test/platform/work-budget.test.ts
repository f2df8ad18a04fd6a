import { createScheduledController, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { lastUsedLog } from "../../src/api-keys/object/last-used.ts";
import { findManifest, readPointer } from "../../src/catalogue/snapshot/manifest.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import type { EventMessage } from "../../src/events/messages.ts";
import { eventMessageOf } from "../../src/events/outbox.ts";
import { DELIVERIES_IN_D1_MS } from "../../src/events/retention.ts";
import worker from "../../src/index.ts";
import { EVENT_METHODS } from "../../src/mcp/events/methods.ts";
import { database } from "../../src/platform/db.ts";
import { newEventId } from "../../src/platform/ids.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { events } from "../../src/platform/tables.ts";
import { ACCOUNT_BUDGETS } from "../../src/rate-limit/account-budgets.ts";
import { bucketName } from "../../src/rate-limit/buckets.ts";
import { publishToStreams } from "../../src/stream/publish.ts";
import { DELIVERY_ARCHIVE_CRON } from "../../src/webhooks/delivery/delivery-archive.ts";
import { generateWebhookSecret } from "../../src/webhooks/secrets.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { createCompetitor, createProduct, insertProducts, publishSnapshot, randomProductId } from "../helpers/catalogue-factory.ts";
import {
  authorizeUrl,
  codeFor,
  codeRedemption,
  connect,
  ORIGIN,
  openConsent,
  pkcePair,
  refreshRequest,
  registerClient,
  workerFetch,
} from "../helpers/connect.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, randomTestIp, type WorkCountField } from "../helpers/http.ts";
import { lastUsedMarkStored } from "../helpers/last-used.ts";
import { fetchDocument, METHODS } from "../helpers/openapi.ts";
import { found, report } from "../helpers/secret-scanning.ts";
import { type Cost, costOf, statementsOf } from "../helpers/statements.ts";
import { adminToken } from "../helpers/tokens.ts";
import { HOOKS_ORIGIN, hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, endpointSettled, ingest, runQueue } from "../helpers/webhooks.ts";
import { invocationLog, type LoggedWork } from "../helpers/work-log.ts";

/**
 * A work budget per invocation that every route, MCP tool, the stream, a fan-out batch, a webhook endpoint object's
 * run, the stream hubs' publish, each cron task and the objects' clock-driven alarms join: the D1 statements it makes,
 * the rows each read statement reads, the R2 reads, and what it causes (Caused), measured at two data sizes
 * (SIZES products, events, price points, other accounts' keys and webhooks), each held under a stated budget that
 * is the same at both sizes. A read statement may read at most 3 × the rows it returns + 25 (an index range, not a
 * scan). Measured at the bindings (D1 and R2 spied in the isolate the worker shares with the test), so work done
 * in waitUntil or inside a handler's helpers counts too. The budget table is checked against the OpenAPI document
 * and the MCP tool list: a route or tool added later without a budget fails "every operation has a budget".
 */

const SIZES = [2_000, 20_000] as const;

/**
 * What one invocation may make the service write, send and keep, counted over every invocation it sets off until the
 * service is quiet again (its own final tally, the queue batches and objects' alarms after it, the catalogue build it
 * pokes): D1 rows written, object requests (the key's and others') and the rows objects write, R2 writes (class A),
 * queue messages, outbound requests (signed deliveries, as the endpoints receive them) and bytes stored (the values
 * bound to D1's inserts and updates, and the size of each object R2 stores; an object's own bytes are bounded by its
 * rows), and KV's reads and writes (one-click connect's OAuth records, src/connect/; a write is a put, a delete or a list).
 */
interface Caused {
  d1RowsWritten: number;
  objectRequests: number;
  objectRowsWritten: number;
  r2Writes: number;
  queueMessages: number;
  outbound: number;
  bytesStored: number;
  kvReads: number;
  kvWrites: number;
}
/**
 * A read: one call to the key's object, which writes a row when it opens a block of admissions, and a `last_used`
 * mark handed on to its shard (a call and the mark's row) when 14 minutes have passed; nothing else written, sent or kept.
 */
const READ: Caused = {
  d1RowsWritten: 0,
  objectRequests: 2,
  objectRowsWritten: 3,
  r2Writes: 0,
  queueMessages: 0,
  outbound: 0,
  bytesStored: 0,
  kvReads: 0,
  kvWrites: 0,
};
/**
 * A budget: the most D1 statements and R2 reads (get, head) one invocation may make at any size, and what it may
 * cause (READ unless said). `rowsRead`, where given, caps the rows all its statements read together instead of the
 * rule per statement (a fan-out's candidate query reads a few rows a question, whatever it finds).
 */
interface Budget {
  statements: number;
  r2Reads: number;
  rowsRead?: number;
  caused: Caused;
}
const budget = (statements: number, r2Reads = 0, rowsRead?: number, caused: Partial<Caused> = {}): Budget => ({
  statements,
  r2Reads,
  rowsRead,
  caused: { ...READ, ...caused },
});
/** A budget that writes: `caused` on top of a read's. */
const writes = (statements: number, caused: Partial<Caused>, r2Reads = 0, rowsRead?: number): Budget =>
  budget(statements, r2Reads, rowsRead, caused);
/**
 * `count` deliveries made: each attempt's row (3 with its index entries; a few a run mark the webhook) and its bytes, one signed POST each, and the
 * endpoint's object that makes them (a call and a row or two a run).
 */
const deliveriesCaused = (count: number): Partial<Caused> => ({
  d1RowsWritten: 4 * count + 10,
  outbound: count,
  objectRequests: count,
  objectRowsWritten: 2 * count + 10,
  bytesStored: 500 * count,
});
/** The test webhooks an account may keep (contract, fifth wave). */
const TEST_WEBHOOKS = 2;
/**
 * `changes` sandbox changes: in the account's sandbox object, per change its overlay, history and event rows with their
 * index entries (10 rows; no D1), and per change and test webhook a delivery (its attempt rows in D1).
 */
const sandboxCaused = (changes: number): Partial<Caused> => {
  const deliveries = deliveriesCaused(TEST_WEBHOOKS * changes);
  return {
    ...deliveries,
    objectRequests: 10,
    objectRowsWritten: 10 * changes + deliveries.objectRowsWritten!,
  };
};
/** A replay of this size's span of 600 price changes: a delivery each, queued. */
const replayCaused: Partial<Caused> = { ...deliveriesCaused(600), queueMessages: 600, objectRequests: READ.objectRequests };

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
  caused: Caused;
  /** The invocations counted in `caused`, by kind (a request's id is shown as "request"). */
  invocations: string[];
}

const utf8 = new TextEncoder();
/** The bytes of the values a statement binds, as stored: text as UTF-8, numbers as 8 bytes. */
const boundBytes = (params: readonly unknown[]) =>
  params.reduce<number>(
    (sum, value) =>
      sum +
      (typeof value === "string" ? utf8.encode(value).byteLength : value instanceof ArrayBuffer ? value.byteLength : value == null ? 0 : 8),
    0,
  );
const WRITE_STATEMENT = /^\s*(insert|update|replace)\b/i;
/** The clock's own D1 write (a `last_used` shard's flush, src/api-keys/object/last-used.ts), seen at the binding. */
const CLOCK_STATEMENT = /^\s*UPDATE api_keys SET last_used_at/i;

/** Spies on a bucket's puts, telling `stored` the size of each object stored (a streamed body's too). */
function putCounted(bucket: R2Bucket, stored: (bytes: number) => void) {
  const real = bucket.put.bind(bucket) as (...args: unknown[]) => Promise<R2Object | null>;
  return vi.spyOn(bucket, "put").mockImplementation((async (...args: unknown[]) => {
    const object = await real(...args);
    stored(object?.size ?? 0);
    return object;
  }) as never);
}

/**
 * What `run` costs. Its D1 statements (with the rows each reads, re-run for `meta.rows_read`) and R2 reads are seen
 * at the bindings, which every invocation in this isolate shares: right for a queue batch or a cron run called
 * here, and for a response that keeps working after its headers (a stream). A request that returns its response is
 * counted by its final tally instead (its log line: its body's work and its work after the answer included), so a
 * builder alarm or a queue batch running meanwhile is not charged to it. What it causes is counted from every
 * invocation's final tally logged from its start until the service is quiet again.
 */
async function measure(run: () => Promise<Response | undefined>, { clock = false } = {}): Promise<Measured> {
  // A catalogue build an earlier call poked runs now, not in this one's window.
  await runDurableObjectAlarm(catalogueBuilder(env));
  let r2Reads = 0;
  let r2BytesPut = 0;
  const spies = [env.ARCHIVE, env.CATALOGUE, env.EXPORTS].flatMap((bucket) => [
    ...(["get", "head"] as const).map((method) => {
      const real = bucket[method].bind(bucket) as (...args: unknown[]) => unknown;
      return vi.spyOn(bucket, method).mockImplementation(((...args: unknown[]) => {
        r2Reads++;
        return real(...args);
      }) as never);
    }),
    putCounted(bucket, (bytes) => {
      r2BytesPut += bytes;
    }),
  ]);
  try {
    const log = invocationLog();
    const firstLine = log.lines.length;
    const receivedBefore = receiver.received.length;
    let meter: Record<WorkCountField, number> | undefined;
    let requestId: string | null = null;
    let ran: { statements: number; r2Reads: number } = { statements: 0, r2Reads: 0 };
    const statements = await statementsOf(async (seen) => {
      const res = await run();
      ran = { statements: seen.length, r2Reads };
      if (res) {
        requestId = res.headers.get("X-Request-Id");
        meter = await log.finalTally(res);
      }
      await quiet(() => seen.length + receiver.received.length);
    });
    // The run's own statements are held to the rows-read rule; what it set off is in `caused`.
    const costs = await costOf(statements.slice(0, ran.statements));
    const lines = log.lines.slice(firstLine).filter((line) => setOff(line, requestId, clock));
    const total = (field: keyof LoggedWork) => lines.reduce((sum, line) => sum + Number(line[field] ?? 0), 0);
    const caused: Caused = {
      d1RowsWritten: total("d1RowsWritten"),
      objectRequests: total("keyObjectCalls") + total("otherObjectCalls"),
      objectRowsWritten: total("doRowsWritten"),
      r2Writes: total("r2ClassA"),
      queueMessages: total("queueSent"),
      outbound: receiver.received.length - receivedBefore,
      bytesStored:
        statements
          .filter((s) => WRITE_STATEMENT.test(s.sql) && (clock || !CLOCK_STATEMENT.test(s.sql)))
          .reduce((sum, s) => sum + boundBytes(s.params), 0) + r2BytesPut,
      kvReads: total("kvReads"),
      kvWrites: total("kvWrites"),
    };
    const invocations = lines.map((line) => (line.request_id ? "request" : line.invocation));
    if (!meter) return { ...ran, costs, caused, invocations };
    return { statements: meter["d1-statements"]!, r2Reads: meter["r2-b"]!, costs, caused, invocations };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

/**
 * Invocations that run on a clock, not for one request: the `last_used` shards' writes (at most one a second a shard)
 * and flushes (at most every 45 s a shard), and a key object's alarm (writing a block's unused admissions, or refusals
 * counted meanwhile). Each is an operation of its own in the model (docs/costs.json), so a request's window does not
 * take them on.
 */
const PERIODIC = new Set(["last_used_write", "last_used_flush", "api_key_object_alarm"]);

/**
 * Whether a logged invocation is one the measured run set off: not a periodic one, and of the requests only the run's
 * own (its response's, or, when it hands back none, the streams it opened); another request's line lands in the window
 * when it ends there (an earlier stream, an MCP session's). `clock`: the run is a clock's own (an object's alarm).
 */
function setOff(line: LoggedWork, requestId: string | null, clock: boolean): boolean {
  if (PERIODIC.has(line.invocation)) return clock;
  if (!line.request_id) return true;
  return requestId ? line.request_id === requestId : line.invocation === "GET /events/stream";
}

/**
 * Waits until what an invocation set off has run: the catalogue build an ingestion poked, then a moment longer than a
 * queue batch's wait to fill (1 s) with no new statement or delivery (queue batches, objects' alarms), 12 s at most.
 */
async function quiet(activity: () => number) {
  await runDurableObjectAlarm(catalogueBuilder(env));
  for (let before = -1, waited = 0; activity() !== before && waited < 10; waited++) {
    before = activity();
    await new Promise((resolve) => setTimeout(resolve, 1200));
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
/** ... and when they ended: the span stays the same whatever is ingested later. */
let windowUntil = "";
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
  // Their keys' MCP events subscriptions, live until the next hour is out (src/mcp/events/service.ts writes them so).
  await generate(
    add,
    `INSERT INTO webhooks (id, account_id, url, events, filters, secret_ciphertext, source, expires_at, api_key_id)
     SELECT printf('sub_budget%d', ${from} + i), printf('budget-other-%d', ${from} + i), 'https://hooks.test/other-mcp', '["price.changed"]',
       '${OTHERS_FILTERS}', 'v1.x.y', 'mcp', '${new Date(Date.now() + 3_600_000).toISOString()}', printf('key_budget%d', ${from} + i) FROM n`,
  );
  grown = size;
  await growOverlay(size / 40);
  // Price changes of the last minutes for the windowed replay: each asks for its offer's prior prices.
  windowSince = new Date().toISOString();
  for (let round = 0; round < 3; round++)
    await ingest(Array.from({ length: 200 }, (_, k) => ({ sku: `BUDGET-WIN-${k}`, price: `${100 - round * 10 - (k % 7)}.${size % 97}` })));
  windowUntil = new Date(Date.now() + 1).toISOString();
  await publishSnapshot();
  await settle();
  const pointer = (await readPointer(env.CATALOGUE))!;
  servingSegments = (await findManifest(env.CATALOGUE, pointer.manifest))!.segments.length;
}

/** The segments (about 1,000 products each) of the snapshot this size serves: what the whole converted list streams. */
let servingSegments = 0;
/**
 * The whole catalogue converted is the one answer whose size is the catalogue's (the same for every account, never
 * another account's data): each segment's converted piece is read from R2, or converted from its product ranges and
 * kept after the answer (docs/catalogue.md, "The converted list"). So its budget is `fixed` plus `each` a segment of the
 * snapshot served, read when the entry is checked.
 */
const perSegment = (fixed: Budget, each: { r2Reads: number; r2Writes: number; bytesStored: number }): Budget => ({
  statements: fixed.statements,
  get r2Reads() {
    return fixed.r2Reads + each.r2Reads * servingSegments;
  },
  get caused() {
    const { r2Writes, bytesStored } = fixed.caused;
    return {
      ...fixed.caused,
      r2Writes: r2Writes + each.r2Writes * servingSegments,
      bytesStored: bytesStored + each.bytesStored * servingSegments,
    };
  },
});

let overlaid = 0;
/**
 * The owner's own sandbox changes, through POST /test/observations: `count` sandbox products changed (50 at the smaller
 * size, 500 at the larger), each with a history row and an event, so its test key's reads meet a small and a large
 * overlay.
 */
async function growOverlay(count: number) {
  for (let start = overlaid; start < count; start += 100) {
    const observations = sandboxProducts.slice(start, Math.min(count, start + 100)).map(({ sku, offers: [offer] }) => ({
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

let sandboxProducts: SandboxProduct[] = [];
/** `count` price changes of the sandbox's products, each a price no earlier change of this test gave it. */
function sandboxChanges(count: number) {
  priceChanges++;
  return sandboxProducts.slice(0, count).map(({ sku, offers: [offer] }) => ({
    sku,
    name: "x",
    competitor: { id: offer!.competitor_id, name: "x" },
    price: offer!.currency === "JPY" ? `${10_000 + priceChanges}` : `${priceChanges}.25`,
    currency: offer!.currency,
    in_stock: true,
  }));
}

/** Asks for `count` test webhooks of the owner's at one host, whatever the service lets it keep. */
async function askForTestWebhooks(count: number) {
  for (let made = 0; made < count; made++)
    await call("POST", "/webhooks", { token: owner.token, body: { url: `${HOOKS_ORIGIN}/budget-test-${made}`, environment: "test" } });
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
/** The access token of an AI client the owner connected by OAuth (its connector key). */
let connectorToken: string;
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

/** The first converted read of a day publishes its rates to R2 (one small object). */
const PUBLISHED_RATES: Partial<Caused> = { r2Writes: 1, bytesStored: 1_000 };

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
    writes(1, PUBLISHED_RATES, SNAPSHOT_FILTER_READS + 1),
  ],
  // The whole list converted: the pointer and manifest, the builder's list of kept pieces, and per segment its piece
  // (converted from its ranges when not kept yet: at most INLINE_CONVERTED_SEGMENTS a response, else a 503). Caused:
  // the pieces kept after the answer, and the builder's warm pass it asks for (src/key-data/live.ts).
  "GET /products?currency=": [
    route("GET", () => "/products?currency=EUR", key, undefined, true),
    perSegment(writes(1, { ...PUBLISHED_RATES, objectRequests: 3, objectRowsWritten: 4 }, 4), {
      r2Reads: 3,
      r2Writes: 1,
      bytesStored: 150_000,
    }),
  ],
  "GET /products/{id}?currency=": [
    route("GET", () => `/products/${productId}?currency=JPY`, key),
    writes(1, PUBLISHED_RATES, SNAPSHOT_PRODUCT_READS + 1),
  ],
  // A test key's reads: its account's overlay (one call to its sandbox object, no D1), laid over the base the isolate
  // generates; no R2. A conversion reads its rate.
  "GET /products (test key)": [route("GET", () => "/products", testKey, undefined, true), budget(0)],
  "GET /products?sku= (test key)": [route("GET", () => "/products?sku=TEST-CF-0001", testKey, undefined, true), budget(0)],
  "GET /products?sku=&currency= (test key)": [
    route("GET", () => "/products?sku=TEST-CF-0001&currency=EUR", testKey, undefined, true),
    budget(1, 1),
  ],
  "GET /products/{id} (test key)": [route("GET", () => `/products/${sandboxProductId}`, testKey), budget(0)],
  "GET /products/{id}/history": [route("GET", () => `/products/${productId}/history`, key), budget(4, 2)],
  "GET /products/{id}/history (test key)": [route("GET", () => `/products/${sandboxProductId}/history`, testKey), budget(0)],
  // From the snapshot's manifest: its pointer and manifest when this isolate last read them over a second ago.
  "GET /competitors": [route("GET", () => "/competitors", key), budget(0, 2)],
  "GET /competitors (test key)": [route("GET", () => "/competitors", testKey), budget(0)],
  // The day's rates as ?currency= uses them (published by the converted reads above): the isolate's copy, read again
  // from R2 at most once a second; never D1. A test key reads the same rates.
  "GET /fx-rates": [route("GET", () => "/fx-rates", key), budget(0, 1)],
  "GET /fx-rates (test key)": [route("GET", () => "/fx-rates", testKey), budget(0, 1)],
  "GET /events": [route("GET", () => "/events", key), budget(6, 2)],
  "GET /events (test key)": [route("GET", () => "/events", testKey), budget(0)],
  // Ten sandbox products changed in the account's object (no D1), and the first delivery after the answer (its final
  // tally): the account's test webhooks read from D1. Caused: per change the object's overlay, history and event rows,
  // and per delivery to a test webhook (2 at most) its attempt rows.
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
    writes(1, sandboxCaused(10)),
  ],
  // A full request of 100 sandbox changes with the account's test webhooks (it asked for 20 at one host; an account
  // keeps at most 2): each change's rows and event, and at most one delivery per change and test webhook.
  "POST /test/observations (100 changes, test webhooks)": [
    async () => {
      await askForTestWebhooks(20);
      return route(
        "POST",
        () => "/test/observations",
        testKey,
        () => ({ observations: sandboxChanges(100) }),
      )();
    },
    writes(1, sandboxCaused(100)),
  ],
  "GET /events?since=": [route("GET", () => `/events?since=${encodeURIComponent(ago(3_600_000))}`, key), budget(6, 2)],
  "GET /account/events": [route("GET", () => "/account/events", login), budget(6, 2)],
  "GET /account": [route("GET", () => "/account", login), budget(3)],
  // A usage read from each of the account's keys' objects (the owner's keys of this test).
  "GET /account/usage": [route("GET", () => "/account/usage?granularity=hour", login), budget(4, 0, undefined, { objectRequests: 60 })],
  "GET /api-keys": [route("GET", () => "/api-keys", login), budget(3)],
  "POST /api-keys": [
    route(
      "POST",
      () => "/api-keys",
      login,
      () => ({ name: "budget" }),
    ),
    writes(6, { d1RowsWritten: 4, bytesStored: 1_000 }),
  ],
  "POST /api-keys/{id}/rotate": [
    route(
      "POST",
      async () => `/api-keys/${await spareKey()}/rotate`,
      login,
      () => ({}),
    ),
    // The new key's row, the old one's end, and the push to the old key's object.
    writes(8, { d1RowsWritten: 6, objectRequests: 4, objectRowsWritten: 6, bytesStored: 1_000 }),
  ],
  "GET /api-keys/{id}/usage": [route("GET", () => `/api-keys/${owner.keyId}/usage?granularity=hour`, login), budget(3)],
  "DELETE /api-keys/{id}": [
    route("DELETE", async () => `/api-keys/${await spareKey()}`, login),
    writes(6, { d1RowsWritten: 1, objectRequests: 4, objectRowsWritten: 6, bytesStored: 500 }),
  ],
  "PATCH /api-keys/{id}": [
    route(
      "PATCH",
      () => `/api-keys/${owner.keyId}`,
      login,
      () => ({ name: "renamed" }),
    ),
    writes(6, { d1RowsWritten: 1, bytesStored: 500 }),
  ],
  // One-click connect's consent (src/connect/), as the dashboard reads and answers it: its view from KV (a read); and
  // allowed, the connector key's row as POST /api-keys writes one, the grant and its code in KV, the consent's records
  // ended (the library's and the view): three KV reads (the view, the consent, the client) and four writes.
  "GET /oauth/consents/{handle}": [
    async () => {
      const { handle } = await pendingConsent();
      return route("GET", () => `/oauth/consents/${encodeURIComponent(handle)}`, login)();
    },
    budget(3, 0, undefined, { kvReads: 1 }),
  ],
  "POST /oauth/consents/{handle}": [
    async () => {
      const { handle, cookie } = await pendingConsent();
      return async () => {
        const res = await call("POST", `/oauth/consents/${encodeURIComponent(handle)}`, {
          token: owner.token,
          body: { allow: true },
          headers: { Cookie: cookie },
        });
        expect(res.status, await res.clone().text()).toBe(200);
        await res.arrayBuffer();
        return res;
      };
    },
    writes(6, { d1RowsWritten: 4, bytesStored: 1_000, kvReads: 3, kvWrites: 4 }),
  ],
  "GET /webhooks": [route("GET", () => "/webhooks", login), budget(3)],
  "POST /webhooks": [
    route(
      "POST",
      () => "/webhooks",
      login,
      // Rules that match no event here, so the owner's later fan-outs do not grow with the webhooks this entry makes.
      () => ({ url: hookUrl("budget-new"), filters: { skus: ["BUDGET-NONE"] } }),
    ),
    // The webhook's row and the rows that file it under its rules (triggers).
    writes(6, { d1RowsWritten: 12, bytesStored: 1_000 }),
  ],
  "GET /webhooks/{id}": [route("GET", () => `/webhooks/${hookId}`, login), budget(3)],
  "DELETE /webhooks/{id}": [route("DELETE", async () => `/webhooks/${await spareHook()}`, login), writes(6, { d1RowsWritten: 4 })],
  "PATCH /webhooks/{id}": [
    route(
      "PATCH",
      () => `/webhooks/${hookId}`,
      login,
      () => ({ description: "budget" }),
    ),
    writes(6, { d1RowsWritten: 3, bytesStored: 500 }),
  ],
  "POST /webhooks/{id}/test": [
    route("POST", () => `/webhooks/${hookId}/test`, login),
    writes(4, { d1RowsWritten: 4, queueMessages: 1, outbound: 1, bytesStored: 1_000 }),
  ],
  "POST /webhooks/{id}/rotate-secret": [
    route(
      "POST",
      () => `/webhooks/${hookId}/rotate-secret`,
      login,
      () => ({}),
    ),
    writes(4, { d1RowsWritten: 1, bytesStored: 1_000 }),
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
      () => ({ since: windowSince, until: windowUntil }),
    ),
    writes(12, replayCaused, 4, 3000),
  ],
  "POST /webhooks/{id}/replay (new_low_days)": [
    route(
      "POST",
      () => `/webhooks/${windowHookId}/replay`,
      login,
      () => ({ since: windowSince, until: windowUntil }),
    ),
    writes(12, replayCaused, 4, 5000),
  ],
  "GET /webhooks/{id}/deliveries": [route("GET", () => `/webhooks/${hookId}/deliveries`, login), budget(4, 2)],
  "GET /exports": [route("GET", () => "/exports", login), budget(3)],
  // An export of the account's sandbox changes of the last second (none: what it costs to begin and end an export,
  // whatever the data; a step's work with data is the runner's entry below): the row, its runner's start, and what it
  // causes, the runner's one step (src/exports/runner.ts): the row read and updated, the account's sandbox object
  // asked for its events (one call), and the manifest written to R2.
  "POST /exports": [
    route(
      "POST",
      () => "/exports",
      login,
      () => ({ kind: "changes", format: "parquet", environment: "test", since: ago(1000) }),
    ),
    writes(3, { d1RowsWritten: 6, objectRequests: 4, objectRowsWritten: 6, r2Writes: 1, bytesStored: 2_000 }),
  ],
  // The row, and its manifest from R2 (its files, each given a signed URL).
  "GET /exports/{id}": [route("GET", async () => `/exports/${await finishedExport()}`, login), budget(3, 1)],
  "PUT /admin/accounts/{id}/plan": [
    route(
      "PUT",
      () => `/admin/accounts/${owner.sub}/plan`,
      adminLogin,
      () => ({ plan: "premium" }),
    ),
    // A push to each of the account's keys' objects (the owner's keys of this test), before the answer.
    writes(4, { d1RowsWritten: 1, objectRequests: 60, objectRowsWritten: 60, bytesStored: 500 }),
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
    // Caused: the offer's rows and event, the catalogue build it pokes (its parts and index to R2), the relay, the
    // deliveries of the 3 webhooks it matches (at most 2 here are the owner's own that match it); and for each whole
    // list a client asked for in a currency that day (EUR, by GET /products?currency=), the builder's converted piece of
    // the segment it rewrote and its list of kept pieces.
    writes(
      16,
      { d1RowsWritten: 40, objectRequests: 30, objectRowsWritten: 30, r2Writes: 10, queueMessages: 2, outbound: 4, bytesStored: 350_000 },
      2,
      600,
    ),
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
    // New rates make new converted pieces: for each whole list a client asked for in a currency that day (EUR, by
    // GET /products?currency=), the builder converts every segment again in its own steps, and lists them.
    perSegment(writes(5, { d1RowsWritten: 4, r2Writes: 2, bytesStored: 2_000 }, 1), { r2Reads: 0, r2Writes: 1, bytesStored: 150_000 }),
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
    // The key's revocation, the leak's notice (an account event, queued) and the push to the key's object.
    writes(8, { d1RowsWritten: 16, queueMessages: 1, objectRequests: 8, objectRowsWritten: 8, bytesStored: 4_000 }, 0, 400),
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
    // The key's object, the account's hub (opening and closing the stream) and the key's `last_used` mark.
    writes(4, { objectRequests: 6, objectRowsWritten: 6 }),
  ],
  // A backfill of this size's 600 windowed price changes of 200 products, each asking its offer's 30-day low: the
  // windows are answered without an archive read per product.
  "GET /events/stream?since=&new_low_days=": [
    async () => async () => {
      const stream = await openStream(streamKey, `?since=${encodeURIComponent(windowSince)}&new_low_days=30`);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await stream.cancel();
      return undefined;
    },
    // Its pages' windows answered from the offers' day rows (one batch a page), no archive read. The span runs to now,
    // so its pages grow with the catalogue's events this test ingests after the windowed ones (up to ~900 by the end).
    writes(40, { objectRequests: 6, objectRowsWritten: 6 }, 4, 8000),
  ],
};

/** A consent of the owner's awaiting its answer (one-click connect): a client registered, its authorisation request made. */
const pendingConsent = async () => openConsent(authorizeUrl(await registerClient("Budget agent"), (await pkcePair()).challenge));

/** A call of one-click connect's own (a protocol request, as an MCP client sends it), with what it needs made beforehand. */
const oauthCall =
  (prepare: () => Promise<[string, RequestInit?]>, status = 200): Invocation =>
  async () => {
    const [url, init] = await prepare();
    return async () => {
      const res = await workerFetch(url, { redirect: "manual", ...init });
      expect(res.status, `${url}: ${await res.clone().text()}`).toBe(status);
      await res.arrayBuffer();
      return res;
    };
  };

/**
 * One-click connect's OAuth endpoints (src/connect/routes.ts), not operations of the document (OAuth is its own
 * protocol, as /mcp's is): each measured as a route is. None reads D1; each is counted in the client IP's bucket, and
 * the library keeps its records in KV: a client's registration (a write), an authorisation request's consent and the
 * dashboard's view of it (the client read twice, two writes), a code's or a refresh token's grant (read with its client,
 * then written with the new access token).
 */
const OAUTH: Record<string, [Invocation, Budget]> = {
  "GET /.well-known/oauth-protected-resource": [oauthCall(async () => [`${ORIGIN}/.well-known/oauth-protected-resource`]), budget(0)],
  "GET /.well-known/oauth-authorization-server": [oauthCall(async () => [`${ORIGIN}/.well-known/oauth-authorization-server`]), budget(0)],
  "POST /oauth/register": [
    oauthCall(
      async () => [
        `${ORIGIN}/oauth/register`,
        {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({
            client_name: "Budget agent",
            redirect_uris: ["http://127.0.0.1:33418/callback"],
            token_endpoint_auth_method: "none",
          }),
        },
      ],
      201,
    ),
    budget(0, 0, undefined, { kvWrites: 1 }),
  ],
  "GET /oauth/authorize": [
    oauthCall(async () => [authorizeUrl(await registerClient("Budget agent"), (await pkcePair()).challenge)], 302),
    budget(0, 0, undefined, { kvReads: 2, kvWrites: 2 }),
  ],
  "POST /oauth/token (code)": [
    oauthCall(async () => {
      const { clientId, code, verifier } = await codeFor(owner.token);
      return codeRedemption(clientId, code, verifier);
    }),
    budget(0, 0, undefined, { kvReads: 2, kvWrites: 2 }),
  ],
  "POST /oauth/token (refresh)": [
    oauthCall(async () => {
      const { clientId, tokens } = await connect(owner.token);
      return refreshRequest(clientId, tokens.refresh_token);
    }),
    budget(0, 0, undefined, { kvReads: 2, kvWrites: 2 }),
  ],
};

/** Every route measured: the document's operations, and one-click connect's OAuth endpoints. */
const ALL_ROUTES = { ...ROUTES, ...OAUTH };

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
  "search_products (currency)": [{ query: "Snapshot product", limit: 20, currency: "EUR" }, budget(5, 1)],
  price_history: [{ product_id: "prd_budget_busy", points: 50 }, budget(4, 2)],
  list_competitors: [{}, budget(3, 2)],
  recent_changes: [{ limit: 20 }, budget(4, 2)],
  // A connector key's OAuth token (one-click connect): the isolate knows the token's key after its client's first call,
  // so a tool costs what it costs with an API key, and no KV read.
  "list_competitors (connector token)": [{}, budget(3, 2), () => connectorToken],
  "search_products (test key)": [{ query: "Espresso", limit: 20 }, budget(0), testKey],
  "recent_changes (test key)": [{ limit: 20 }, budget(0), testKey],
};

/**
 * The MCP events methods (src/mcp/events/methods.ts): `params` runs first, not measured (a cursor read, the
 * subscription an unsubscribe ends). A new subscription's verification is one outbound POST; its row, its indexes'
 * entries and its rule values are what it writes. A poll from a cursor reads the feed's page as GET /events does.
 */
const MCP_EVENTS: Record<string, [() => Promise<Record<string, unknown>>, Budget, (() => string)?]> = {
  "events/list": [async () => ({}), budget(0)],
  "events/poll": [async () => ({ name: "price.changed", arguments: {}, cursor: null }), budget(1)],
  "events/poll (cursor)": [async () => ({ name: "price.changed", arguments: { skus: [OURS] }, cursor: await feedPresent() }), budget(5, 3)],
  "events/poll (test key)": [async () => ({ name: "price.changed", arguments: {}, cursor: null }), budget(0), testKey],
  "events/subscribe": [
    async () => subscriptionParams(hookUrl("budget-mcp")),
    writes(4, { d1RowsWritten: 12, outbound: 1, bytesStored: 2_000 }),
  ],
  "events/subscribe (refresh)": [
    async () => {
      const params = subscriptionParams(hookUrl("budget-mcp-refresh"));
      await (await mcpClient()).request({ method: "events/subscribe", params }, z.looseObject({}));
      return params;
    },
    writes(4, { d1RowsWritten: 2, bytesStored: 1_000 }),
  ],
  "events/unsubscribe": [
    async () => {
      const params = subscriptionParams(hookUrl("budget-mcp-end"));
      await (await mcpClient()).request({ method: "events/subscribe", params }, z.looseObject({}));
      return { ...params, delivery: { url: params.delivery.url } };
    },
    writes(1, { d1RowsWritten: 12 }),
  ],
};

const subscriptionParams = (url: string) => ({
  name: "price.changed",
  arguments: { skus: [OURS] },
  delivery: { url, secret: generateWebhookSecret() },
});

/** The owner's feed's latest event: a poll's cursor. */
const feedPresent = async () =>
  (
    await (
      await mcpClient()
    ).request({ method: "events/poll", params: { name: "price.changed", arguments: {}, cursor: null } }, z.looseObject({}))
  ).cursor as string;

/** A background entry's options: `clock`, it is the clock's own work; `prepare`, made beforehand (not measured). */
interface BackgroundOptions {
  clock?: boolean;
  prepare?: () => Promise<void>;
}

const BACKGROUND: Record<string, [() => Promise<undefined>, Budget, BackgroundOptions?]> = {
  "fan-out of a queue batch of 10 events": [
    async () => {
      const ids = await commitEvents(0, 10, { fannedOut: false });
      const rows = await database(env.DB).select().from(events).where(inArray(events.id, ids));
      await runQueue(rows.map(eventMessageOf));
      return undefined;
    },
    // A delivery message per event and matching webhook (the owner's webhooks without rules: up to 6 by then, one
    // made at each size and slowdown pass), each delivered (its attempt rows).
    writes(12, { ...deliveriesCaused(10 * 6), queueMessages: 10 * 6 }, 2, 400),
  ],
  // The same, beside an MCP subscription to those events once its account's subscription budget is spent
  // (src/webhooks/delivery/budgets.ts): the rule-less webhooks' deliveries as above, and for the subscription only the
  // budget asked once (its object) and the gap kept on its row; nothing sent to it.
  "fan-out of a queue batch of 10 events to a subscription past its account's budget": [
    async () => {
      const ids = await commitEvents(0, 10, { type: "stock.changed", fannedOut: false });
      const rows = await database(env.DB).select().from(events).where(inArray(events.id, ids));
      await runQueue(rows.map(eventMessageOf));
      return undefined;
    },
    writes(
      12,
      {
        ...deliveriesCaused(10 * 6),
        queueMessages: 10 * 6,
        d1RowsWritten: deliveriesCaused(10 * 6).d1RowsWritten! + 1,
        objectRequests: 10 * 6 + 1,
      },
      2,
      400,
    ),
    { prepare: spentSubscription },
  ],
  // Each sweep in steps of a bounded size: the outbox's relay (at most 500 events a run, one message each), the
  // archives' moves (a few objects to R2, their rows deleted).
  "cron: sweeps (outbox, catalogue, archives, expiring keys)": [
    () => scheduled("* * * * *"),
    writes(
      40,
      { d1RowsWritten: 1_000, queueMessages: 500, objectRequests: 40, objectRowsWritten: 40, r2Writes: 8, bytesStored: 400_000 },
      8,
    ),
  ],
  // A step of 5,000 attempts at most to one R2 object, their rows deleted.
  "cron: delivery archive": [
    () => scheduled(DELIVERY_ARCHIVE_CRON),
    writes(12, { d1RowsWritten: 10, r2Writes: 8, bytesStored: 8_000_000 }, 8),
  ],
  // The queue consumer making a batch of 10 deliveries itself (src/webhooks/delivery/consumer.ts): the endpoint answers.
  "queue batch of 10 deliveries": [
    async () => {
      await runQueue(Array.from({ length: 10 }, () => deliveryTo(hookId)));
      return undefined;
    },
    writes(2, deliveriesCaused(10)), // the webhooks read once, the attempts recorded in one batch
  ],
  // A webhook's own object (src/webhooks/delivery/endpoint.ts) making 10 deliveries handed to it: its alarm's run.
  "webhook endpoint object: a run of 10 deliveries": [
    async () => {
      const handed = Array.from({ length: 10 }, () => deliveryTo(hookId));
      await env.WEBHOOK_ENDPOINT.get(env.WEBHOOK_ENDPOINT.idFromName(hookId)).accept(handed);
      await endpointSettled(hookId);
      return undefined;
    },
    writes(6, deliveriesCaused(10)),
  ],
  // The clock's own work, each an operation of its own in the model. A `last_used` shard's flush: the marks it holds
  // (a fresh key's, and any other key's of this test in its shard) in one UPDATE.
  "last_used shard: its flush": [
    async () => {
      expect(await runDurableObjectAlarm(lastUsedLog(env, markedKeyId))).toBe(true);
      return undefined;
    },
    writes(1, { d1RowsWritten: 20, objectRowsWritten: 40, bytesStored: 4_000 }),
    { clock: true, prepare: markAUse },
  ],
  // A key object's alarm after a block of admissions: what the block left unused, written once.
  "API key object: its alarm": [
    async () => {
      await runDurableObjectAlarm(env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(owner.key))));
      return undefined;
    },
    writes(0, { objectRowsWritten: 3 }),
    { clock: true },
  ],
  // The owner's sandbox object's daily alarm: what is past its 7 days deleted (here, nothing yet).
  "sandbox object: its retention alarm": [
    async () => {
      expect(await runDurableObjectAlarm(env.SANDBOX.get(env.SANDBOX.idFromName(owner.sub)))).toBe(true);
      return undefined;
    },
    writes(0, { objectRowsWritten: 1 }),
    { clock: true },
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
    // The hubs (one call each) and the two streams' opening.
    writes(8, { objectRequests: 12, objectRowsWritten: 12 }, 2),
  ],
  // One step of a live catalogue export (src/exports/runner.ts): at most 5 segments of the snapshot it pinned (about
  // 5,000 products, whatever the catalogue's size), written as one Parquet file per currency its rows hold (each file's
  // money at its currency's scale: here two, as many at both sizes), and the manifest; here its last step.
  // Its R2 reads: the pinned manifest and each segment's NDJSON ranges (one or two each after a full build; at most
  // 5 × the extent cap of docs/catalogue.md however fragmented).
  "export runner: a catalogue step": [
    async () => {
      await runDurableObjectAlarm(env.EXPORT_RUNNER.get(env.EXPORT_RUNNER.idFromName(stepExportId)));
      return undefined;
    },
    writes(2, { d1RowsWritten: 2, objectRowsWritten: 2, r2Writes: 3, bytesStored: 3_000_000 }, 12),
    { prepare: prepareExportStep },
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

function expectWithin(name: string, measured: Measured, { statements, r2Reads, rowsRead, caused }: Budget) {
  results.set(name, [...(results.get(name) ?? []), measured]);
  const sizes = results
    .get(name)!
    .map((m) => `${m.statements} statements, ${m.r2Reads} R2 reads, caused ${JSON.stringify(m.caused)} by ${m.invocations.join(",")}`);
  expect(measured.statements, `${name}: D1 statements at each size: ${sizes.join(" → ")}`).toBeLessThanOrEqual(statements);
  expect(measured.r2Reads, `${name}: R2 reads at each size: ${sizes.join(" → ")}`).toBeLessThanOrEqual(r2Reads);
  for (const field of Object.keys(caused) as (keyof Caused)[])
    expect.soft(measured.caused[field], `${name}: ${field} at each size: ${sizes.join(" → ")}`).toBeLessThanOrEqual(caused[field]);
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

let receiver: Receiver;

beforeAll(async () => {
  receiver = installReceiver();
  admin = await adminToken();
  owner = await freshAccount({ plan: "premium" });
  await createCompetitor({ id: "cmp_a", name: "A" });
  await createCompetitor({ id: "cmp_b", name: "B" });
  await createProduct({ id: "prd_budget_busy", sku: "BUDGET-BUSY" });
  await ingest([{ sku: OURS, competitor: { id: "cmp_a", name: "A" }, price: "50.00" }]);
  productId = (await env.DB.prepare("SELECT id FROM products WHERE sku = ?").bind(OURS).first<string>("id"))!;
  // Today's rates straight into D1 (a currency without a rate is refused): the first converted read publishes them.
  await env.DB.prepare("INSERT OR REPLACE INTO fx_rates (date, base, rates) VALUES (?, 'EUR', ?)")
    .bind(new Date().toISOString().slice(0, 10), JSON.stringify({ USD: "1.0832", JPY: "162.45", KWD: "0.3331" }))
    .run();
  hookId = (await createWebhook(owner.token, { url: hookUrl("budget") })).id;
  streamKey = (await addKey(owner.token)).key;
  windowHookId = (await createWebhook(owner.token, { url: hookUrl("budget-window"), filters: { new_low_days: 30 } })).id;
  await newSandboxKey();
  connectorToken = (await connect(owner.token, { clientName: "Budget agent" })).tokens.access_token;
  sandboxProducts = (await (await call("GET", "/products", { token: sandboxKey })).json<{ products: SandboxProduct[] }>()).products;
  sandboxProductId = (await (await call("GET", "/products?sku=TEST-CF-0001", { token: sandboxKey })).json<{ products: SandboxProduct[] }>())
    .products[0]!.id;
}, 300_000);

/**
 * Fresh keys for the owner and its sandbox, each already seen by its object: each pass over the operations on its own
 * keys (two passes together can pass the premium plan's 300 a minute; a test key has the standard plan's 60).
 */
async function freshKeys() {
  const fresh = await addKey(owner.token);
  owner = { ...owner, key: fresh.key, keyId: fresh.id };
  await newSandboxKey();
  expect((await call("GET", "/competitors", { token: sandboxKey, headers: { "CF-Connecting-IP": randomTestIp() } })).status).toBe(200);
  // Its object's first request reads the key from D1 once; the entries measure a key already seen.
  // (The feed, which needs no snapshot: the first size's keys are made before its catalogue is published.)
  expect((await call("GET", "/events?limit=1", { token: fresh.key, headers: { "CF-Connecting-IP": randomTestIp() } })).status).toBe(200);
}

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
    expect([...new Set(Object.keys(MCP_EVENTS).map((name) => name.replace(/ .*$/, "")))].sort()).toEqual(Object.keys(EVENT_METHODS).sort());
  });

  describe.each(SIZES)("at %i products, events, price points and other accounts", (size) => {
    beforeAll(async () => {
      // Fresh keys first: growing the overlay takes the test key's minute, which the last size's calls may have spent.
      await freshKeys();
      await growTo(size);
      await freshKeys();
    }, 600_000);

    // Each waits for what it set off to end (up to 12 s), so each has a minute.
    it.each(Object.keys(ALL_ROUTES))("%s", async (name) => expectWithin(name, await measureRoute(name), ALL_ROUTES[name]![1]), 60_000);
    it.each(Object.keys(MCP_TOOLS))(
      "MCP %s",
      async (name) => expectWithin(`MCP ${name}`, await measureTool(name), MCP_TOOLS[name]![1]),
      60_000,
    );
    it.each(Object.keys(MCP_EVENTS))(
      "MCP %s",
      async (name) => expectWithin(`MCP ${name}`, await measureEventsMethod(name), MCP_EVENTS[name]![1]),
      60_000,
    );
    it.each(Object.keys(BACKGROUND))("%s", async (name) => expectWithin(name, await measureBackground(name), BACKGROUND[name]![1]), 60_000);
  });
});

async function measureRoute(name: string): Promise<Measured> {
  const [invocation, limits] = ALL_ROUTES[name]!;
  const run = await invocation();
  // Counted at the bindings (a stream), or its rows totalled: nothing else may be running.
  if (limits.rowsRead !== undefined || name.startsWith("GET /events/stream")) await settle();
  return measure(run);
}

async function measureTool(name: string): Promise<Measured> {
  const [args, , apiKey = key] = MCP_TOOLS[name]!;
  const client = await mcpClient(apiKey());
  return measure(async () => {
    const result = await client.callTool({ name: name.replace(/ .*$/, ""), arguments: args });
    // A tool error costs little: each call is the answer it is meant to be (a real one, but the query too short to run).
    expect(Boolean(result.isError), `MCP ${name}: ${JSON.stringify(result).slice(0, 500)}`).toBe(REFUSED_CALLS.has(name));
    return lastMcpResponse;
  });
}

async function measureEventsMethod(name: string): Promise<Measured> {
  const [prepare, , apiKey = key] = MCP_EVENTS[name]!;
  const params = await prepare();
  const client = await mcpClient(apiKey());
  return measure(async () => {
    const result = await client.request({ method: name.replace(/ .*$/, ""), params }, z.looseObject({}));
    expect(result, `MCP ${name}`).toBeDefined();
    return lastMcpResponse;
  });
}

async function measureBackground(name: string): Promise<Measured> {
  await settle();
  const [run, , { clock, prepare } = {}] = BACKGROUND[name]!;
  await prepare?.();
  return measure(run, { clock });
}

/**
 * An MCP subscription to the stock changes commitEvents makes (its competitor), of an account of its own (spending the
 * owner's budget would hold back the owner's subscriptions in the other entries), written once as events/subscribe
 * writes one (its verification and secret play no part here: nothing is sent to it), and that account's
 * subscription-delivery budget spent.
 */
let spender: Awaited<ReturnType<typeof freshAccount>> | undefined;
async function spentSubscription(): Promise<void> {
  if (!spender) {
    spender = await freshAccount({ plan: "premium" });
    await env.DB.prepare(
      `INSERT INTO webhooks (id, account_id, url, events, filters, secret_ciphertext, source, expires_at, api_key_id)
       VALUES (?, ?, ?, '["stock.changed"]', '{"competitors":["cmp_test"]}', 'v1.x.y', 'mcp', ?, ?)`,
    )
      .bind(
        `sub_${crypto.randomUUID().replaceAll("-", "")}`,
        spender.sub,
        hookUrl("budget-mcp-spent"),
        new Date(Date.now() + 24 * 3_600_000).toISOString(),
        spender.keyId,
      )
      .run();
  }
  const budgets = env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName(bucketName("account", spender.sub)));
  await budgets.take("subscription-deliveries", ACCOUNT_BUDGETS["subscription-deliveries"].limit, false);
}

/** A finished export of the owner's, made once (GET /exports/{id} reads it). */
let ownersExport: string | undefined;
async function finishedExport(): Promise<string> {
  if (!ownersExport) {
    const res = await call("POST", "/exports", { token: owner.token, body: { kind: "catalogue", environment: "test" } });
    ownersExport = (await res.json<{ id: string }>()).id;
  }
  await vi.waitFor(
    async () => {
      const row = await env.DB.prepare("SELECT status FROM exports WHERE id = ?").bind(ownersExport).first<{ status: string }>();
      expect(row?.status).toBe("succeeded");
    },
    { timeout: 20_000 },
  );
  return ownersExport;
}

/** A live catalogue export whose runner is left before its last step, that step's alarm pending (run by the entry). */
let stepExportId = "";
async function prepareExportStep() {
  const res = await call("POST", "/exports", { token: owner.token, body: { kind: "catalogue", format: "parquet" } });
  stepExportId = (await res.json<{ id: string }>()).id;
  await vi.waitFor(
    async () => {
      const row = await env.DB.prepare("SELECT status FROM exports WHERE id = ?").bind(stepExportId).first<{ status: string }>();
      expect(row?.status).toBe("succeeded");
    },
    { timeout: 60_000 },
  );
  await settle();
  await runInDurableObject(env.EXPORT_RUNNER.get(env.EXPORT_RUNNER.idFromName(stepExportId)), async (_, state) => {
    const kept = (await state.storage.get<{ cursor: unknown; manifest: { snapshot: string; files: unknown[] } }>("state"))!;
    const snapshot = (await findManifest(env.CATALOGUE, kept.manifest.snapshot))!;
    await state.storage.put("state", {
      ...kept,
      cursor: { phase: "catalogue", manifest: kept.manifest.snapshot, segment: Math.max(0, snapshot.segments.length - 5) },
    });
    await state.storage.setAlarm(Date.now() + 3_600_000); // run by the entry, not by the clock
  });
}

/** A key whose first use has been marked and handed to its `last_used` shard, which has not flushed it yet. */
let markedKeyId = "";
async function markAUse() {
  const fresh = await addKey(owner.token);
  markedKeyId = fresh.id;
  const shard = lastUsedLog(env, fresh.id);
  const marks = () => runInDurableObject(shard, async (_, state) => state.storage.sql.exec("SELECT count(*) AS n FROM mark_rows").one().n);
  expect((await call("GET", "/competitors", { token: fresh.key, headers: { "CF-Connecting-IP": randomTestIp() } })).status).toBe(200);
  await lastUsedMarkStored(fresh.key, fresh.id);
  expect(await marks()).toBeGreaterThan(0); // held until the shard's flush, FLUSH_EVERY_MS after its first row
}

/**
 * No account's data slows another's: every operation, tool and background task of the owner's is measured, then
 * another account (B) is given 20,000 of every kind of row it can hold (keys, webhooks with their rules, exports, their
 * deliveries, its account events in the feed's ranges, and its sandbox's events and history in its sandbox object),
 * and each is measured again. (Price history is the catalogue's, not an account's; streams live in objects, not rows.) The
 * second tally must be the first's: the same statements and R2 reads, the rows read give or take what the owner's own
 * first call added (one row of its own: a key, a webhook, a delivery), and nothing more written, sent or kept.
 */
describe("another account's rows", () => {
  const OTHER = "slowdown-b";
  const ROWS = 20_000;
  const alone = new Map<string, Measured>();
  /** The catalogue's events when each entry was measured alone: a span that runs to now holds those committed since. */
  const eventsAlone = new Map<string, number>();
  const entries = () => [
    ...Object.keys(ALL_ROUTES).map((name) => [name, () => measureRoute(name)] as const),
    ...Object.keys(MCP_TOOLS).map((name) => [`MCP ${name}`, () => measureTool(name)] as const),
    ...Object.keys(MCP_EVENTS).map((name) => [`MCP ${name}`, () => measureEventsMethod(name)] as const),
    ...Object.keys(BACKGROUND).map((name) => [name, () => measureBackground(name)] as const),
  ];

  it("each operation's tally, with no rows of B's", async () => {
    await freshKeys();
    keysAlone = await ownersKeys();
    hooksAlone = await ownersHooks();
    for (const [name, run] of entries()) {
      eventsAlone.set(name, await catalogueEvents());
      alone.set(name, await run());
    }
  }, 900_000);

  it(`each operation's tally is the same beside B's ${ROWS} rows of every kind`, async () => {
    await growOther(OTHER, ROWS);
    await freshKeys();
    // A call that reaches each of the owner's keys' objects (a usage read, a plan's push) reaches the keys it made since.
    const keysMade = (await ownersKeys()) - keysAlone;
    // An ingestion is delivered to each of the owner's webhooks and subscriptions, and the owner's own calls between the
    // two measurements make some (POST /webhooks, MCP events/subscribe): each adds its delivery, not B.
    const hooksMade = (await ownersHooks()) - hooksAlone;
    const rowsRead = (m: Measured) => m.costs.reduce((sum, cost) => sum + cost.rowsRead, 0);
    for (const [name, run] of entries()) {
      const before = alone.get(name)!;
      // The stream's backfill runs to now: each catalogue event committed since (by the owner's own ingestions) adds its
      // row, its history's and its day's.
      const span = name === "GET /events/stream?since=&new_low_days=" ? 5 * ((await catalogueEvents()) - eventsAlone.get(name)!) : 0;
      const beside = await run();
      const what = `${name}: alone ${JSON.stringify({ ...before, costs: undefined })}, beside B ${JSON.stringify({ ...beside, costs: undefined })}`;
      expect.soft(beside.statements, what).toBeLessThanOrEqual(before.statements);
      // The snapshot's pointer and manifest are read again when this isolate's copy is over a second old.
      expect.soft(beside.r2Reads, what).toBeLessThanOrEqual(before.r2Reads + SNAPSHOT_HEAD_READS);
      expect
        .soft(rowsRead(beside), `${what}\n${beside.costs.map((c) => `${c.rowsRead}: ${c.sql}`).join("\n")}`)
        .toBeLessThanOrEqual(rowsRead(before) + OWN_GROWTH + 3 * keysMade + span);
      // What a sandbox change sends depends on what the account sent in the minute before (its test-delivery budget),
      // not on B: its reads are compared, its deliveries held to their budget above.
      if (name.startsWith("POST /test/observations")) continue;
      for (const field of Object.keys(before.caused) as (keyof Caused)[]) {
        const perKey = field === "objectRequests" || field === "objectRowsWritten" ? keysMade : 0;
        const perHook = hooksMade * (DELIVERY_CAUSES[field] ?? 0);
        // Bytes stored follow the values written (a price's digits, an id's), a little apart from one call to the next.
        const bytes = field === "bytesStored" ? Math.ceil(before.caused.bytesStored * 0.02) : 0;
        expect
          .soft(beside.caused[field], `${what}: ${field}`)
          .toBeLessThanOrEqual(before.caused[field] + OWN_GROWTH + perKey + perHook + bytes);
      }
    }
  }, 1_200_000);
});

/** The snapshot's pointer and its manifest: read again by an isolate at most once a second. */
const SNAPSHOT_HEAD_READS = 2;
/** What the owner's own call between the two measurements may add to a read: a row (3 rows read for it) and its index entries. */
const OWN_GROWTH = 6;
let keysAlone = 0;
let hooksAlone = 0;
/** What one more delivery of an ingestion causes: its POST, its endpoint object's call and rows, its attempt's D1 rows. */
const DELIVERY_CAUSES: Partial<Record<keyof Caused, number>> = { outbound: 1, objectRequests: 1, objectRowsWritten: 3, d1RowsWritten: 4 };
const catalogueEvents = async () =>
  (await env.DB.prepare("SELECT count(*) AS n FROM events WHERE account_id IS NULL").first<number>("n")) ?? 0;
const ownersHooks = async () =>
  (await env.DB.prepare("SELECT count(*) AS n FROM webhooks WHERE account_id = ? AND status = 'enabled'")
    .bind(owner.sub)
    .first<number>("n")) ?? 0;
const ownersKeys = async () =>
  (await env.DB.prepare("SELECT count(*) AS n FROM api_keys WHERE account_id = ?").bind(owner.sub).first<number>("n")) ?? 0;

/** `count` of every kind of live row an account holds, for `account`, as production holds them (recent, spread in time). */
async function growOther(account: string, count: number) {
  await env.DB.prepare("INSERT INTO accounts (id) VALUES (?)").bind(account).run();
  const start = Date.now() - 3_600_000;
  const at = `strftime('%Y-%m-%dT%H:%M:%fZ', (${start} + i * ${3_600_000 / count}) / 1000.0, 'unixepoch')`;
  await generate(
    count,
    `INSERT INTO api_keys (id, account_id, name, prefix, key_hash) SELECT printf('key_${account}%d', i), '${account}', 'k', 'pda_x', printf('b%063x', i) FROM n`,
  );
  await generate(
    count,
    `INSERT INTO webhooks (id, account_id, url, events, filters, secret_ciphertext)
     SELECT printf('whk_${account}%d', i), '${account}', 'https://hooks.test/b', '["price.changed","stock.changed"]', '{"skus":["NOT-OURS"]}', 'v1.x.y' FROM n`,
  );
  await generate(
    count,
    `INSERT INTO webhooks (id, account_id, url, events, filters, secret_ciphertext, source, expires_at, api_key_id)
     SELECT printf('sub_${account}%d', i), '${account}', 'https://hooks.test/b-mcp', '["price.changed"]', '{"skus":["NOT-OURS"]}', 'v1.x.y',
       'mcp', '${new Date(Date.now() + 3_600_000).toISOString()}', printf('key_${account}%d', i) FROM n`,
  );
  // Its attempts as D1 holds them between the delivery archive's runs for its webhook: the last DELIVERIES_IN_D1_MS, none
  // due (DELIVERY_ARCHIVE_AFTER_MS) during the test. Due ones would be moved by the archive's run: B's own work, not B slowing another's.
  const attemptsStart = Date.now() - DELIVERIES_IN_D1_MS;
  await generate(
    count,
    `INSERT INTO webhook_deliveries (event_id, webhook_id, type, attempt, status_code, duration_ms, outcome, delivered_at)
     SELECT printf('evt_b%d', i), 'whk_${account}1', 'price.changed', 1, 200, 5, 'delivered',
       strftime('%Y-%m-%dT%H:%M:%fZ', (${attemptsStart} + i * ${DELIVERIES_IN_D1_MS / count}) / 1000.0, 'unixepoch') FROM n`,
  );
  await generate(
    count,
    `INSERT INTO exports (id, account_id, environment, kind, format, status, rows, files, bytes, created_at, updated_at)
     SELECT printf('exp_${account}%d', i), '${account}', 'live', 'catalogue', 'parquet', 'succeeded', 10, 1, 100, ${at}, ${at} FROM n`,
  );
  // Its sandbox's events and history, in its own object (src/sandbox/object.ts), as its changes would write them.
  await runInDurableObject(env.SANDBOX.get(env.SANDBOX.idFromName(account)), (_, state) => {
    const rows = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})`;
    const now = new Date().toISOString();
    state.storage.sql.exec(
      `${rows} INSERT INTO events (id, type, timestamp, payload) SELECT printf('evt_b%032x', i), 'price.changed', ?, '{"data":{}}' FROM n`,
      now,
    );
    state.storage.sql.exec(
      `${rows} INSERT INTO history (product_id, competitor_id, price_minor, currency, in_stock, observed_at)
       SELECT printf('prd_b%d', i % 500), 'test_harbor', i, 'USD', 1, ? FROM n`,
      now,
    );
  });
  await generate(
    count,
    `INSERT INTO events (id, type, timestamp, payload, created_at, relayed_at, fanned_out_at, account_id)
     SELECT printf('evt_%032x', 900000000 + i), 'api_key.expiring', ${at}, '{}', ${at}, ${at}, ${at}, '${account}' FROM n`,
  );
}
