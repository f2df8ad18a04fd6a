/**
 * `npm run simulate [-- --json] [--scale 10] [--plan split]`: the price-data API at the target load for a year, on
 * paper, fed by the code. Every per-operation figure (D1 statements and rows, object requests and rows, R2
 * operations by class, queue messages, CPU) comes from docs/costs.json, which `npm run bench -- --costs` measures
 * with the worker's own meter; this file holds only Cloudflare's published limits and list prices (each with the
 * page it comes from), the workload's shape and the storage a row takes. Where the code has a number (retention,
 * archive sizes per run, the queue's batch size), it is imported or read, not typed again.
 *
 * Operations measured at two catalogue sizes are extrapolated linearly to the workload's catalogue (a full list's
 * segment reads grow with it; a data request's do not). `--scale N` multiplies every rate of the workload (requests,
 * keys, products, events, deliveries, webhooks, streams). The base plan is today's: one D1 database for everything but
 * the alert windows' day rows, which have their own (ALERTS_DB); `--plan split` puts keys and accounts, the catalogue, and
 * events with deliveries in D1 databases of their own, the last sharded by account, and reads the catalogue from
 * read replicas (docs/scale.md). `--json` prints `{"inputs","limits":[{name,used,limit,ratio}],"cost_per_million_requests"}`.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import {
  FLUSH_EVERY_MS,
  LAST_USED_SHARDS,
  MARK_EVERY_MS,
  MARKS_PER_STATEMENT,
  WRITE_EVERY_MS,
} from "../src/api-keys/object/last-used-schedule.ts";
import {
  DELIVERIES_IN_D1_MS,
  DELIVERY_ARCHIVE_AFTER_MS,
  DELIVERY_ARCHIVE_ROWS_PER_RUN,
  DELIVERY_ARCHIVE_SCAN_ROWS,
  DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN,
  EVENT_ARCHIVE_OBJECTS_PER_RUN,
  EVENTS_IN_D1_MS,
  EVENTS_PER_ARCHIVE_OBJECT,
  HISTORY_ARCHIVE_AFTER_MS,
  HISTORY_ARCHIVE_PRODUCTS_PER_RUN,
  HISTORY_IN_D1_MS,
  OFFER_DAYS_KEPT_MS,
  RETENTION_MS,
} from "../src/events/retention.ts";
import { D1_STATEMENT_FLOOR_MS } from "../src/platform/db.ts";
import { DAY_MS, DAY_SECONDS, MINUTE_MS } from "../src/platform/time.ts";
import { LIFETIME_MS, STREAM_HUB_COUNT } from "../src/stream/limits.ts";
import { DELIVERY_QUEUES } from "../src/webhooks/delivery/queues.ts";

// ---- docs/costs.json ------------------------------------------------------------------------------------------------

/** One operation's measured cost (bench/modes/costs.ts writes them). */
export interface OperationCost {
  per: string;
  d1_statements: number;
  /** D1's serial time (ms): each statement at max(1 ms, the duration D1 reported for it). */
  d1_ms: number;
  /**
   * Of d1_ms, the alert windows' own database's (ALERTS_DB, src/alerts/tables.ts). Absent from a file the bench
   * measured before that database existed: the model then counts all of an operation's time on the main database.
   */
  d1_ms_alerts?: number;
  /** Statements whose result reported no duration (drizzle's selects, `raw`): in d1_ms at the floor. */
  d1_untimed: number;
  d1_rows_read: number;
  d1_rows_written: number;
  do_requests: number;
  do_rows_written: number;
  r2_class_a: number;
  r2_class_b: number;
  queue_messages: number;
  cpu_ms: number;
  /** last_used_flush: the marks a flush wrote, at the bench. */
  marks_per_flush?: number;
  /** last_used_flush: the rows of gathered marks a flush deleted (each a shard's write), at the bench. */
  writes_per_flush?: number;
  /** last_used_write: the marks a shard's write stored, at the bench. */
  marks_per_write?: number;
  /** key_object_alarm: alarms per refused request, at the bench. */
  per_refused_request?: number;
  /** catalogue_export_step, changes_export_step: the steps the bench's export took. */
  steps_per_export?: number;
}

/** What a stored row takes, measured by the bench on its state (bench/modes/storage.ts). */
export interface StoredBytes {
  /** Per D1 table: its pages and its indexes' ÷ its rows. */
  d1_bytes_per_row: Record<string, number>;
  d1_rows: Record<string, number>;
  /** An API key's object: its SQLite database's size. */
  object_bytes_per_key: number;
  key_objects: number;
  /** The catalogue snapshot's segments in R2 (both forms and their index) per product. */
  snapshot_bytes_per_product: number;
}

/** An operation's figures at the largest size measured, and at every size. */
type MeasuredCost = OperationCost & {
  by_products: Record<string, OperationCost>;
  steps_per_ingestion?: number;
  steps_by_products?: Record<string, number>;
};

export interface Costs {
  commit: string;
  measured_at: string;
  products: number[];
  operations: Record<OperationName, MeasuredCost> & Partial<Record<MeasuredOnlyName, MeasuredCost>>;
  storage: StoredBytes & { by_products: Record<string, StoredBytes> };
}

export const OPERATIONS = [
  "data_request_admitted",
  "data_request_refused",
  "list_products_gzip",
  "list_products_filtered_1pct",
  "list_products_converted",
  "get_product",
  "product_history",
  "events_page",
  "stream_connection_minute",
  "mcp_tool_call",
  "ingest_1000_scattered",
  "webhook_delivery",
  "catalogue_build_step",
  "cron_run",
  "key_management_request",
  "test_list_products_gzip",
  "test_observations",
  // A key's periodic work and the objects' alarms: operations of their own, at their own rates.
  "key_last_used_mark",
  "last_used_write",
  "last_used_flush",
  "key_object_alarm",
  "webhook_endpoint_alarm",
] as const;
export type OperationName = (typeof OPERATIONS)[number];

/**
 * What the bench measures and the model does not price: an export's steps (docs/exports.md), catalogue and changes,
 * for their figures per step; the workload has no rate of exports. docs/costs.json may hold them; the model reads none.
 */
export const MEASURED_ONLY = ["catalogue_export_step", "changes_export_step"] as const;
type MeasuredOnlyName = (typeof MEASURED_ONLY)[number];

/**
 * The D1 tables the model sizes, each from its bytes per row as the bench measures them (bench/modes/storage.ts):
 * the alert windows' offer_price_days and offer_price_far (src/alerts/tables.ts) as much as the rest.
 */
export const D1_TABLES = [
  "products",
  "offers",
  "api_keys",
  "events",
  "price_history",
  "webhook_deliveries",
  "offer_price_days",
  "offer_price_far",
] as const;
export type D1Table = (typeof D1_TABLES)[number];

export const COSTS_FILE = new URL("../docs/costs.json", import.meta.url);

/** docs/costs.json, refused (as a missing operation is) when it lacks an operation or a table's measured bytes per row. */
export function readCosts(file: URL = COSTS_FILE): Costs {
  const costs = JSON.parse(readFileSync(file, "utf8")) as Costs;
  const missing = OPERATIONS.filter((name) => !costs.operations[name]);
  if (missing.length > 0) throw new Error(`docs/costs.json has no ${missing.join(", ")}: run npm run bench -- --costs`);
  // A table the bench held no rows of measures 0 bytes: not a size the model may take.
  const unmeasured = D1_TABLES.filter((table) => !(costs.storage.d1_bytes_per_row[table]! > 0));
  if (unmeasured.length > 0)
    throw new Error(`docs/costs.json has no measured bytes per row for ${unmeasured.join(", ")}: run npm run bench -- --costs`);
  return costs;
}

/** docs/costs.json's figures of an operation, in the contract's order. */
export const COST_FIELDS = [
  "d1_statements",
  "d1_ms",
  "d1_ms_alerts",
  "d1_rows_read",
  "d1_rows_written",
  "do_requests",
  "do_rows_written",
  "r2_class_a",
  "r2_class_b",
  "queue_messages",
  "cpu_ms",
] as const;
type Figures = Record<(typeof COST_FIELDS)[number], number>;

/** What shows an operation touching more of the data as the catalogue grows: the rows and objects it reads. */
const DATA_READ = ["d1_rows_read", "r2_class_b"] as const;
/**
 * What reads more with the catalogue reads several times more at the larger of two sizes ten times apart (a full list:
 * 2.3 R2 reads at 10,000 products, 21 at 100,000). Fewer extra rows or objects than GROWTH_FLOOR per operation is a
 * read that comes with time, landing in one sample and not the other (the snapshot's pointer, re-checked by an isolate
 * at most once a second: once in 40 requests at one size, never at the other); less than GROWTH_FACTOR times as many is
 * the sample's own spread (a failing endpoint's alarm read 48 rows at one size and 65 at the other: how many retries a
 * 30-second window caught, not the catalogue).
 */
const GROWTH_FLOOR = 0.5;
const GROWTH_FACTOR = 2;
/** The figures that are times: of work that does not grow, the larger of the two sizes' stands. */
const TIMES: readonly (typeof COST_FIELDS)[number][] = ["cpu_ms", "d1_ms", "d1_ms_alerts"];

/**
 * An operation's figures at `products`: a straight line through the two sizes measured (never below the larger's),
 * when the operation reads more at the larger size (a full list's segments). Otherwise the larger size's figures stand
 * (CPU and D1's time: the larger of the two), since a line through two noisy figures of work that does not grow (a
 * stream's idle minute, one product, a pointer re-check) would price noise a hundred times over.
 */
export function figuresAt(cost: Costs["operations"][OperationName], products: number): Figures {
  const sizes = Object.keys(cost.by_products)
    .map(Number)
    .sort((a, b) => a - b);
  const small = cost.by_products[sizes[0]!]!;
  const largeSize = sizes.at(-1)!;
  const large = cost.by_products[largeSize]!;
  const grows = DATA_READ.some((field) => large[field] - small[field] >= GROWTH_FLOOR && large[field] >= GROWTH_FACTOR * small[field]);
  return Object.fromEntries(
    COST_FIELDS.map((field) => {
      const [atSmall, atLarge] = [small[field] ?? 0, large[field] ?? 0];
      if (largeSize === sizes[0] || (TIMES.includes(field) && !grows)) return [field, Math.max(atSmall, atLarge)];
      if (!grows) return [field, atLarge];
      const slope = (atLarge - atSmall) / (largeSize - sizes[0]!);
      return [field, Math.max(atLarge, atLarge + slope * (products - largeSize))];
    }),
  ) as Figures;
}

/**
 * The alarm steps one ingestion's build takes at `products`: a straight line through the sizes measured (never below
 * the larger's), as the figures are; a file measured before steps were recorded by size gives its one count.
 */
function stepsAt(cost: Costs["operations"]["catalogue_build_step"], products: number): number {
  const measured = Object.entries(cost.steps_by_products ?? {})
    .map(([size, steps]) => [Number(size), steps] as const)
    .sort((a, b) => a[0] - b[0]);
  if (measured.length < 2) return cost.steps_per_ingestion ?? 1;
  const [small, large] = [measured[0]!, measured.at(-1)!];
  const slope = (large[1] - small[1]) / (large[0] - small[0]);
  return Math.max(large[1], large[1] + slope * (products - large[0]));
}

/**
 * A last_used flush carrying `marks` marks in `writes` rows of gathered marks: its D1 rows (one per mark) scale with
 * the marks, its statements with the statements they need (one per MARKS_PER_STATEMENT), its D1 time with its
 * statements (what was measured is a flush of the bench's few marks: the duration of one statement of thousands is
 * not), and the rows it deletes in its shard with the writes it reads.
 */
function flushAt(cost: Costs["operations"]["last_used_flush"], measured: Figures, marks: number, writes: number): Figures {
  const benchMarks = Math.max(1, cost.marks_per_flush ?? 1);
  const byMarks = marks / benchMarks;
  const byWrites = writes / Math.max(1, cost.writes_per_flush ?? 1);
  const byStatements = Math.ceil(marks / MARKS_PER_STATEMENT) / Math.ceil(benchMarks / MARKS_PER_STATEMENT);
  return {
    ...measured,
    d1_statements: measured.d1_statements * byStatements,
    d1_ms: measured.d1_ms * byStatements,
    d1_ms_alerts: measured.d1_ms_alerts * byStatements,
    d1_rows_read: measured.d1_rows_read * byMarks,
    d1_rows_written: measured.d1_rows_written * byMarks,
    do_rows_written: measured.do_rows_written * byWrites,
  };
}

/** The delivery queue's consumer batch size, as wrangler.toml sets it (the first consumer is WEBHOOK_QUEUE's). */
export function queueBatchSize(toml = readFileSync(new URL("../wrangler.toml", import.meta.url), "utf8")): number {
  const size = /\[\[queues\.consumers\]\][^[]*?max_batch_size\s*=\s*(\d+)/.exec(toml)?.[1];
  if (!size) throw new Error("wrangler.toml: no max_batch_size in [[queues.consumers]]");
  return Number(size);
}

/** The CPU an invocation may use, as wrangler.toml's [limits] sets it. */
export function configuredCpuMs(toml = readFileSync(new URL("../wrangler.toml", import.meta.url), "utf8")): number {
  const ms = /\[limits\][^[]*?cpu_ms\s*=\s*(\d+)/.exec(toml)?.[1];
  if (!ms) throw new Error("wrangler.toml: no cpu_ms in [limits]");
  return Number(ms);
}

// ---- Published limits and prices, each with its source ---------------------------------------------------------------

const WORKERS_LIMITS = "https://developers.cloudflare.com/workers/platform/limits/";
const WORKERS_PRICING = "https://developers.cloudflare.com/workers/platform/pricing/";
const D1_LIMITS = "https://developers.cloudflare.com/d1/platform/limits/";
const D1_PRICING = "https://developers.cloudflare.com/d1/platform/pricing/";
const DO_LIMITS = "https://developers.cloudflare.com/durable-objects/platform/limits/";
const DO_PRICING = "https://developers.cloudflare.com/durable-objects/platform/pricing/";
const QUEUES_LIMITS = "https://developers.cloudflare.com/queues/platform/limits/";
const QUEUES_PRICING = "https://developers.cloudflare.com/queues/platform/pricing/";
const R2_LIMITS = "https://developers.cloudflare.com/r2/platform/limits/";
const R2_PRICING = "https://developers.cloudflare.com/r2/pricing/";

/** A published figure and the page that publishes it. */
type Published = { value: number; source: string };
const at = (value: number, source: string): Published => ({ value, source });

export const LIMITS = {
  /** Workers Paid: D1 queries one invocation may make. */
  d1StatementsPerInvocation: at(1_000, D1_LIMITS),
  /** Workers Paid: the most CPU an invocation may be configured to spend (wrangler.toml [limits] cpu_ms). */
  cpuMsPerInvocationMax: at(300_000, WORKERS_LIMITS),
  /** Workers Paid: subrequests (fetch, R2, Durable Object and queue calls) per invocation. */
  subrequestsPerInvocation: at(10_000, WORKERS_LIMITS),
  /** D1 runs one query at a time per database; its largest database. */
  d1MaxDatabaseGb: at(10, D1_LIMITS),
  /** One object: a soft limit of requests a second. */
  objectRequestsPerSecond: at(1_000, DO_LIMITS),
  queueMessagesPerSecond: at(5_000, QUEUES_LIMITS),
  queueConcurrentConsumers: at(250, QUEUES_LIMITS),
  r2WritesPerSecondPerKey: at(1, R2_LIMITS),
};

export const PRICES = {
  workersMonthly: at(5, WORKERS_PRICING),
  workersIncludedRequests: at(10e6, WORKERS_PRICING),
  workersPerMillionRequests: at(0.3, WORKERS_PRICING),
  workersIncludedCpuMs: at(30e6, WORKERS_PRICING),
  workersPerMillionCpuMs: at(0.02, WORKERS_PRICING),
  objectIncludedRequests: at(1e6, DO_PRICING),
  objectPerMillionRequests: at(0.15, DO_PRICING),
  objectIncludedRowsWritten: at(50e6, DO_PRICING),
  objectPerMillionRowsWritten: at(1, DO_PRICING),
  objectIncludedStorageGb: at(5, DO_PRICING),
  objectPerGbMonth: at(0.2, DO_PRICING),
  objectIncludedGbSeconds: at(400_000, DO_PRICING),
  objectPerMillionGbSeconds: at(12.5, DO_PRICING),
  /** Duration is billed on the memory an object is given, whatever it uses. */
  objectMemoryGb: at(0.128, DO_PRICING),
  d1IncludedRowsRead: at(25e9, D1_PRICING),
  d1PerMillionRowsRead: at(0.001, D1_PRICING),
  d1IncludedRowsWritten: at(50e6, D1_PRICING),
  d1PerMillionRowsWritten: at(1, D1_PRICING),
  d1IncludedStorageGb: at(5, D1_PRICING),
  d1PerGbMonth: at(0.75, D1_PRICING),
  r2IncludedClassA: at(1e6, R2_PRICING),
  r2PerMillionClassA: at(4.5, R2_PRICING),
  r2IncludedClassB: at(10e6, R2_PRICING),
  r2PerMillionClassB: at(0.36, R2_PRICING),
  r2IncludedStorageGb: at(10, R2_PRICING),
  r2PerGbMonth: at(0.015, R2_PRICING),
  queuesIncludedOperations: at(1e6, QUEUES_PRICING),
  queuesPerMillionOperations: at(0.4, QUEUES_PRICING),
  /** A message is written, read and deleted: three operations (per 64 KB). */
  queuesOperationsPerMessage: at(3, QUEUES_PRICING),
};

// ---- The workload's shape -------------------------------------------------------------------------------------------

export interface Workload {
  keys: number;
  requestsPerSecond: number;
  /** Share of each request operation; data_request_admitted takes what the others leave. */
  requestMix: Partial<Record<OperationName, number>>;
  products: number;
  /** Price changes a second (each an event, from an observation that changed something). */
  eventsPerSecond: number;
  /** Observations come in ingestions of this many, scattered over the catalogue (the measured shape). */
  observationsPerIngestion: number;
  deliveriesPerSecond: number;
  webhooks: number;
  openStreams: number;
  /**
   * Share of webhook endpoints that hang (never answer), how long an attempt waits for them, and how often each
   * starts hanging again after answering (a flap: until then its deliveries go to its endpoint object).
   */
  hangingEndpointShare: number;
  hangTimeoutSeconds: number;
  hangingEndpointFlapSeconds: number;
  /** How long a receiver that answers takes (the slow end). */
  receiverSeconds: number;
  /** Isolates serving worldwide: each reads the snapshot's pointer in R2 once a second. */
  isolates: number;
  /** The busiest key: Premium caps one at 300 a minute. */
  busiestKeyRequestsPerSecond: number;
  /**
   * What an archived row takes in R2 (bytes; not measured: the bench runs no archive, which waits days), and how
   * long attempts stay in R2. What a row takes in D1, a key's object and the snapshot are measured (Costs.storage).
   */
  storage: {
    r2BytesPerArchivedEvent: number;
    r2BytesPerArchivedHistoryRow: number;
    r2BytesPerArchivedDelivery: number;
    deliveryArchiveDays: number;
  };
}

export const WORKLOAD: Workload = {
  keys: 1_000_000,
  requestsPerSecond: 10_000,
  requestMix: {
    data_request_refused: 0.05,
    list_products_gzip: 0.0001,
    list_products_filtered_1pct: 0.001,
    // The whole catalogue converted (?currency=): as rare as the unfiltered list; a client converting often filters.
    list_products_converted: 0.0001,
    // Test keys (a developer integrating): a list now and then, and a sandbox change to see a webhook fire.
    test_list_products_gzip: 0.001,
    test_observations: 0.0005,
    get_product: 0.3,
    product_history: 0.005,
    events_page: 0.005,
    mcp_tool_call: 0.01,
    key_management_request: 0.0001,
  },
  products: 1_000_000,
  eventsPerSecond: 11.6,
  observationsPerIngestion: 1_000,
  deliveriesPerSecond: 1_157,
  webhooks: 10_000,
  openStreams: 10_000,
  hangingEndpointShare: 0.05,
  hangTimeoutSeconds: 15,
  hangingEndpointFlapSeconds: 3_600,
  receiverSeconds: 1,
  isolates: 2_000,
  busiestKeyRequestsPerSecond: 300 / 60,
  storage: {
    r2BytesPerArchivedEvent: 120,
    r2BytesPerArchivedHistoryRow: 40,
    r2BytesPerArchivedDelivery: 60,
    deliveryArchiveDays: 31,
  },
};

/** Multiplies every rate and count of the workload by `factor` (the busiest key stays capped by its plan). */
export function scaled(workload: Workload, factor: number): Workload {
  return {
    ...workload,
    keys: workload.keys * factor,
    requestsPerSecond: workload.requestsPerSecond * factor,
    products: workload.products * factor,
    eventsPerSecond: workload.eventsPerSecond * factor,
    deliveriesPerSecond: workload.deliveriesPerSecond * factor,
    webhooks: workload.webhooks * factor,
    openStreams: workload.openStreams * factor,
    isolates: workload.isolates * factor,
  };
}

// ---- Where D1's statements go ----------------------------------------------------------------------------------------

/**
 * A layout of D1: which database each operation's statements go to (shares by database), how many shards a
 * database has (split by account) and how many copies serve its reads (read replicas).
 */
export interface Plan {
  name: string;
  /**
   * Per database, its shards (split by account) and the copies that serve its reads. Read replicas count only where
   * the code reads through D1's Sessions API (`withSession`), and only as Cloudflare documents them: it reads through
   * none today, so every plan has one copy.
   */
  databases: Record<string, { shards: number; readReplicas: number }>;
  /**
   * Per operation, the share of its statements each database gets, and the share of those that only read: its time
   * in the main database (d1_ms less d1_ms_alerts). Its time in the alert windows' own goes to the database that holds
   * their tables (`tables.offer_price_days`), as measured.
   */
  route: Record<OperationName, { database: string; share: number; reads: number }[]>;
  /** Which database holds each table the model sizes (Costs.storage). */
  tables: Record<D1Table, string>;
}

const one = (database: string, reads = 0) => [{ database, share: 1, reads }];

/** The alert windows' tables (src/alerts/tables.ts), in their own database in today's code (ALERTS_DB). */
const ALERT_TABLES: readonly D1Table[] = ["offer_price_days", "offer_price_far"];

/** Today's: one database for everything but the alert windows' day rows, which have their own. */
export const BASE: Plan = {
  name: "one D1 database, and the alert windows' own",
  databases: { main: { shards: 1, readReplicas: 1 }, alerts: { shards: 1, readReplicas: 1 } },
  route: Object.fromEntries(OPERATIONS.map((name) => [name, one("main")])) as Plan["route"],
  tables: Object.fromEntries(D1_TABLES.map((table) => [table, ALERT_TABLES.includes(table) ? "alerts" : "main"])) as Plan["tables"],
};

/**
 * The plan for 10 × (docs/scale.md), each database sized from the bytes a row takes as measured: keys and accounts;
 * the catalogue (products, offers) and its price history, each sharded by product id; the feed (events: every
 * account reads all of it, so it is one database, never split by account); webhook deliveries, an account's own,
 * sharded by account. No read replicas counted: Cloudflare documents one per region, reached by the Sessions API
 * from the client's nearest, and no capacity per replica the model could count.
 */
export const SPLIT: Plan = {
  name: "split: keys; catalogue and history (4 shards each by product); feed (1); deliveries (4 shards by account)",
  databases: {
    keys: { shards: 1, readReplicas: 1 },
    catalogue: { shards: 4, readReplicas: 1 },
    history: { shards: 4, readReplicas: 1 },
    feed: { shards: 1, readReplicas: 1 },
    deliveries: { shards: 4, readReplicas: 1 },
  },
  route: {
    data_request_admitted: one("keys", 1),
    data_request_refused: one("keys", 1),
    key_management_request: one("keys"),
    key_last_used_mark: one("keys"),
    last_used_write: one("keys"),
    last_used_flush: one("keys"),
    key_object_alarm: one("keys"),
    list_products_gzip: one("catalogue", 1),
    list_products_filtered_1pct: one("catalogue", 1),
    list_products_converted: one("catalogue", 1),
    get_product: one("catalogue", 1),
    product_history: one("history", 1),
    mcp_tool_call: one("catalogue", 1),
    catalogue_build_step: one("catalogue", 0.5),
    ingest_1000_scattered: [
      { database: "catalogue", share: 0.4, reads: 0.3 },
      { database: "history", share: 0.2, reads: 0 },
      { database: "feed", share: 0.4, reads: 0 },
    ],
    events_page: one("feed", 1),
    stream_connection_minute: one("feed", 1),
    // A sandbox lives in its account's object (src/sandbox/object.ts); the D1 work its calls keep (the fan-out's test
    // webhooks, a conversion's rate) is the deliveries database's.
    test_list_products_gzip: one("deliveries", 1),
    test_observations: one("deliveries"),
    webhook_delivery: one("deliveries"),
    webhook_endpoint_alarm: one("deliveries"),
    cron_run: [
      { database: "keys", share: 0.2, reads: 0.5 },
      { database: "catalogue", share: 0.15, reads: 0.5 },
      { database: "history", share: 0.15, reads: 0.5 },
      { database: "feed", share: 0.3, reads: 0.5 },
      { database: "deliveries", share: 0.2, reads: 0.5 },
    ],
  },
  tables: {
    api_keys: "keys",
    products: "catalogue",
    offers: "catalogue",
    price_history: "history",
    // The alert windows' days and far rows: an offer's, by product id as its history (docs/scale.md).
    offer_price_days: "history",
    offer_price_far: "history",
    events: "feed",
    webhook_deliveries: "deliveries",
  },
};

const PLANS: Record<string, Plan> = { base: BASE, split: SPLIT };

// ---- The model ----------------------------------------------------------------------------------------------------

const MONTH_SECONDS = 30 * DAY_SECONDS;
const GB = 1e9;

/** Monthly cost of `used` units with `included` free and `perMillion` dollars per million beyond. */
export const overage = (used: number, included: Published, perMillion: Published) =>
  (Math.max(0, used - included.value) / 1e6) * perMillion.value;

export interface Limit {
  name: string;
  used: number;
  limit: number;
  /** used ÷ limit: above 1 the design breaks there; the aim is at most 0.5 for the whole year. */
  ratio: number;
  source: string;
}

/** The requests a key's object admits one at a time (a stream is admitted once, when it opens; a refusal opens no block). */
const KEY_ADMISSIONS = [
  "data_request_admitted",
  "list_products_gzip",
  "list_products_filtered_1pct",
  "list_products_converted",
  "test_list_products_gzip",
  "test_observations",
  "get_product",
  "product_history",
  "events_page",
  "mcp_tool_call",
] as const satisfies readonly OperationName[];

export function simulate(costs: Costs = readCosts(), workload: Workload = WORKLOAD, plan: Plan = BASE) {
  const w = workload;
  const f = Object.fromEntries(OPERATIONS.map((name) => [name, figuresAt(costs.operations[name], w.products)])) as Record<
    OperationName,
    Figures
  >;

  // How often each operation runs, a second.
  const requestShares = { ...w.requestMix };
  const others = Object.values(requestShares).reduce((a, b) => a + (b ?? 0), 0);
  requestShares.data_request_admitted = 1 - others;
  const ingestionsPerSecond = w.eventsPerSecond / w.observationsPerIngestion;
  const buildStepsPerIngestion = stepsAt(costs.operations.catalogue_build_step, w.products);
  // A key's periodic work: every key in use (an upper bound) marks once per MARK_EVERY_MS; a shard stores the marks
  // it gathers at most once per WRITE_EVERY_MS, in one row, and flushes what it holds at most every FLUSH_EVERY_MS, so
  // at this load a write and a flush carry many more marks than the bench's did.
  const marksPerSecond = w.keys / (MARK_EVERY_MS / 1000);
  const writesPerSecond = Math.min(LAST_USED_SHARDS / (WRITE_EVERY_MS / 1000), marksPerSecond);
  const flushesPerSecond = Math.min(LAST_USED_SHARDS / (FLUSH_EVERY_MS / 1000), writesPerSecond);
  f.last_used_flush = flushAt(
    costs.operations.last_used_flush,
    f.last_used_flush,
    marksPerSecond / flushesPerSecond,
    writesPerSecond / flushesPerSecond,
  );
  // A key's object writes a block of admissions sized by the key's last minute (src/api-keys/object/reservations.ts):
  // one row a block, and its alarm's row when the block holds more than one. The bench's key runs back to back (large
  // blocks); here each key makes its share of every admitted request a minute (data, product reads, lists, history,
  // the feed, MCP calls), so its blocks hold that many, one at the least. Each such operation's rows are the bench's
  // less the bench key's block share (the small request's rows there), plus the key's at this rate.
  const perKeyPerMinute = KEY_ADMISSIONS.reduce((sum, name) => sum + (requestShares[name] ?? 0), 0) * ((w.requestsPerSecond * 60) / w.keys);
  const rowsPerAdmission = perKeyPerMinute <= 1 ? 1 : 2 / perKeyPerMinute;
  const benchBlockRows = f.data_request_admitted.do_rows_written;
  for (const name of KEY_ADMISSIONS)
    f[name] = { ...f[name], do_rows_written: Math.max(0, f[name].do_rows_written - benchBlockRows) + rowsPerAdmission };
  const rate: Record<OperationName, number> = {
    ...(Object.fromEntries(OPERATIONS.map((name) => [name, 0])) as Record<OperationName, number>),
    ...Object.fromEntries(Object.entries(requestShares).map(([name, share]) => [name, (share ?? 0) * w.requestsPerSecond])),
    stream_connection_minute: w.openStreams / 60,
    ingest_1000_scattered: w.eventsPerSecond,
    catalogue_build_step: ingestionsPerSecond * buildStepsPerIngestion,
    webhook_delivery: w.deliveriesPerSecond,
    cron_run: 1 / 60,
    key_last_used_mark: marksPerSecond,
    last_used_write: writesPerSecond,
    last_used_flush: flushesPerSecond,
    // A key's alarm writes the refusals its answers left unwritten: as often, per refusal, as the bench saw.
    key_object_alarm:
      (requestShares.data_request_refused ?? 0) * w.requestsPerSecond * (costs.operations.key_object_alarm.per_refused_request ?? 0),
    // A failing endpoint's deliveries are handed to its object, whose alarm attempts them and queues each one's retry:
    // as many alarms as its deliveries ÷ the retries an alarm queued at the bench.
    webhook_endpoint_alarm: (w.deliveriesPerSecond * w.hangingEndpointShare) / Math.max(1, f.webhook_endpoint_alarm.queue_messages),
  };
  const total = (field: (typeof COST_FIELDS)[number]) => OPERATIONS.reduce((sum, name) => sum + rate[name] * f[name][field], 0);
  const perSecond = Object.fromEntries(COST_FIELDS.map((field) => [field, total(field)])) as Figures;

  // D1's serial time: each database runs one statement at a time, each at max(D1_STATEMENT_FLOOR_MS, its measured
  // duration) (d1_ms, summed so by the meter); reads spread over its replicas (none unless the code reads through
  // the Sessions API), everything over its shards. An operation's time in the alert windows' own database
  // (d1_ms_alerts, measured apart) goes to the database holding their tables, the rest where the plan routes it.
  const busy: Record<string, number> = Object.fromEntries(Object.keys(plan.databases).map((name) => [name, 0]));
  const busyByOperation = Object.fromEntries(OPERATIONS.map((name) => [name, 0])) as Record<OperationName, number>;
  const alertsDatabase = plan.tables.offer_price_days;
  for (const name of OPERATIONS) {
    const parts = [
      ...plan.route[name].map((part) => ({ ...part, ms: f[name].d1_ms - f[name].d1_ms_alerts })),
      { database: alertsDatabase, share: 1, reads: 0, ms: f[name].d1_ms_alerts },
    ];
    for (const { database, share, reads, ms } of parts) {
      const { shards, readReplicas } = plan.databases[database]!;
      const seconds = (rate[name] * (ms / 1000) * share * (reads / readReplicas + (1 - reads))) / shards;
      busy[database]! += seconds;
      busyByOperation[name] += seconds;
    }
  }

  // Queue consumers: a batch's healthy deliveries go six at a time; a hanging endpoint's first attempt after it starts
  // hanging holds its batch for the timeout, after which its deliveries go to its endpoint object (failing_since:
  // one probe at a time, off the consumer) until it answers again.
  const batch = queueBatchSize();
  const batchesPerSecond = w.deliveriesPerSecond / batch;
  const healthyBatchSeconds = Math.ceil((batch * (1 - w.hangingEndpointShare)) / 6) * w.receiverSeconds;
  const hangingEndpoints = w.webhooks * w.hangingEndpointShare;
  const batchesHeldPerSecond = Math.min(batchesPerSecond, hangingEndpoints / w.hangingEndpointFlapSeconds);
  const consumerConcurrency = batchesPerSecond * healthyBatchSeconds + batchesHeldPerSecond * w.hangTimeoutSeconds;
  // A fan-out spreads its deliveries over the delivery queues by webhook, each with its own consumers and message rate;
  // the events' own messages (and a delivery's retries) stay on the first.
  const deliveryQueues = DELIVERY_QUEUES.length;
  const consumersPerQueue = consumerConcurrency / deliveryQueues;
  const busiestQueueMessages =
    perSecond.queue_messages - rate.webhook_delivery * f.webhook_delivery.queue_messages * (1 - 1 / deliveryQueues);

  // Objects: the busiest key's, the last-used shards (the marks handed to them and their flushes' alarms), the builder.
  const lastUsedShardRequestsPerSecond = (rate.key_last_used_mark + rate.last_used_flush) / LAST_USED_SHARDS;
  const builderRequestsPerSecond = rate.catalogue_build_step + ingestionsPerSecond + rate.cron_run;
  // The stream hubs (src/stream/stub.ts): each holds the streams of the accounts hashed to it; every ingestion publishes
  // to each, and a stream's own object requests (its connect, its pings) reach its account's hub.
  const hubRequestsPerSecond =
    ingestionsPerSecond + (rate.stream_connection_minute * f.stream_connection_minute.do_requests) / STREAM_HUB_COUNT;

  // Storage after a year.
  const s = w.storage;
  const stored = costs.storage;
  const row = stored.d1_bytes_per_row;
  const eventsPerDay = w.eventsPerSecond * DAY_SECONDS;
  const deliveriesPerDay = w.deliveriesPerSecond * DAY_SECONDS;
  // Each table after a year (GB), from the bytes a row takes as measured (data and indexes).
  const offersPerProduct = stored.d1_rows.offers! / stored.d1_rows.products!;
  const offers = w.products * offersPerProduct;
  // The alert windows' tables (src/catalogue/history-archive.ts): a row per offer, UTC day and currency it changed,
  // kept OFFER_DAYS_KEPT_MS (the day's changes spread over the offers: at most one a day each, so at most the events or
  // the offers a day), and past that one far row per offer that changed (at most the offers).
  const offerDaysPerDay = Math.min(eventsPerDay, offers);
  const d1GbByTable: Record<D1Table, number> = {
    products: (w.products * row.products!) / GB,
    offers: (offers * row.offers!) / GB,
    api_keys: (w.keys * row.api_keys!) / GB,
    events: (((eventsPerDay * EVENTS_IN_D1_MS) / DAY_MS) * row.events!) / GB,
    price_history: (((eventsPerDay * HISTORY_ARCHIVE_AFTER_MS) / DAY_MS) * row.price_history!) / GB,
    webhook_deliveries: (w.deliveriesPerSecond * (DELIVERY_ARCHIVE_AFTER_MS / 1000) * row.webhook_deliveries!) / GB,
    offer_price_days: (((offerDaysPerDay * OFFER_DAYS_KEPT_MS) / DAY_MS) * row.offer_price_days!) / GB,
    offer_price_far: (Math.min(offers, eventsPerDay * 365) * row.offer_price_far!) / GB,
  };
  const d1Gb = Object.values(d1GbByTable).reduce((a, b) => a + b, 0);
  const d1GbByDatabase = Object.fromEntries(
    Object.entries(plan.databases).map(([name, db]) => [
      name,
      D1_TABLES.reduce((n, table) => n + (plan.tables[table] === name ? d1GbByTable[table] : 0), 0) / db.shards,
    ]),
  );
  const d1GbPerDatabase = Math.max(...Object.values(d1GbByDatabase));
  const r2Gb =
    (w.products * stored.snapshot_bytes_per_product +
      ((eventsPerDay * RETENTION_MS) / DAY_MS) * s.r2BytesPerArchivedEvent +
      eventsPerDay * 365 * s.r2BytesPerArchivedHistoryRow +
      deliveriesPerDay * s.deliveryArchiveDays * s.r2BytesPerArchivedDelivery) /
    GB;

  // Cost per month at list prices.
  const p = PRICES;
  const month = (perSecondFigure: number) => perSecondFigure * MONTH_SECONDS;
  const requests = month(w.requestsPerSecond);
  const workerInvocations = month(w.requestsPerSecond + batchesPerSecond + rate.cron_run * 2);
  const r2ClassB = perSecond.r2_class_b + w.isolates;
  const cost = {
    workers:
      p.workersMonthly.value +
      overage(workerInvocations, p.workersIncludedRequests, p.workersPerMillionRequests) +
      overage(month(perSecond.cpu_ms), p.workersIncludedCpuMs, p.workersPerMillionCpuMs),
    objectRequests: overage(month(perSecond.do_requests), p.objectIncludedRequests, p.objectPerMillionRequests),
    objectRowsWritten: overage(month(perSecond.do_rows_written), p.objectIncludedRowsWritten, p.objectPerMillionRowsWritten),
    objectStorage: Math.max(0, (w.keys * stored.object_bytes_per_key) / GB - p.objectIncludedStorageGb.value) * p.objectPerGbMonth.value,
    // An upper bound: every hub awake the whole month (hibernation bills only the time a hub handles a message).
    streamHubDuration: overage(
      STREAM_HUB_COUNT * p.objectMemoryGb.value * MONTH_SECONDS,
      p.objectIncludedGbSeconds,
      p.objectPerMillionGbSeconds,
    ),
    d1:
      overage(month(perSecond.d1_rows_read), p.d1IncludedRowsRead, p.d1PerMillionRowsRead) +
      overage(month(perSecond.d1_rows_written), p.d1IncludedRowsWritten, p.d1PerMillionRowsWritten) +
      Math.max(0, d1Gb - p.d1IncludedStorageGb.value) * p.d1PerGbMonth.value,
    r2:
      overage(month(perSecond.r2_class_a), p.r2IncludedClassA, p.r2PerMillionClassA) +
      overage(month(r2ClassB), p.r2IncludedClassB, p.r2PerMillionClassB) +
      Math.max(0, r2Gb - p.r2IncludedStorageGb.value) * p.r2PerGbMonth.value,
    queues: overage(
      month(perSecond.queue_messages) * p.queuesOperationsPerMessage.value,
      p.queuesIncludedOperations,
      p.queuesPerMillionOperations,
    ),
  };
  const monthly = Object.values(cost).reduce((a, b) => a + b, 0);

  const limit = (name: string, used: number, max: Published | number, source?: string): Limit => {
    const value = typeof max === "number" ? max : max.value;
    return { name, used, limit: value, ratio: used / value, source: source ?? (typeof max === "number" ? "" : max.source) };
  };
  const cpuLimit = configuredCpuMs();
  // The delivery archive runs once a minute (its own cron); a webhook with attempts is due once per (after − keep). A run
  // finds the due webhooks among the oldest DELIVERY_ARCHIVE_SCAN_ROWS attempts: with webhooks moved at a steady rate, the
  // attempts older than x minutes past the oldest webhook's last move are (due a minute) × (attempts a minute each) × x² / 2,
  // so the scan reaches x = √(2 × scan ÷ (due × attempts)) minutes of them: (due a minute) × x webhooks.
  const deliveryPeriodMs = DELIVERY_ARCHIVE_AFTER_MS - DELIVERIES_IN_D1_MS;
  const attemptsPerWebhookMinute = (w.deliveriesPerSecond / w.webhooks) * 60;
  const webhooksDuePerRun =
    (w.webhooks * (1 - Math.exp(-attemptsPerWebhookMinute * (deliveryPeriodMs / MINUTE_MS)))) / (deliveryPeriodMs / MINUTE_MS);
  const webhooksFoundPerRun = Math.sqrt((2 * DELIVERY_ARCHIVE_SCAN_ROWS * webhooksDuePerRun) / attemptsPerWebhookMinute);
  // An invocation of each kind: a request per route, a stream connection (its lifetime, after which its client
  // reconnects), an MCP call, a queue batch, an alarm step, a cron run.
  const perInvocation: Record<OperationName, number> = {
    ...(Object.fromEntries(OPERATIONS.map((name) => [name, 1])) as Record<OperationName, number>),
    stream_connection_minute: LIFETIME_MS / 60_000,
    ingest_1000_scattered: w.observationsPerIngestion,
    webhook_delivery: batch,
  };
  const invocationLimits = OPERATIONS.flatMap((name) => {
    const times = perInvocation[name];
    const subrequests = f[name].do_requests + f[name].r2_class_a + f[name].r2_class_b + f[name].queue_messages;
    return [
      limit(`D1 statements per invocation: ${name}`, f[name].d1_statements * times, LIMITS.d1StatementsPerInvocation),
      limit(`subrequests per invocation: ${name}`, subrequests * times, LIMITS.subrequestsPerInvocation),
      limit(`CPU ms per invocation: ${name}`, f[name].cpu_ms * times, cpuLimit, "wrangler.toml [limits] cpu_ms"),
    ];
  });
  const limits: Limit[] = [
    limit("CPU ms per invocation as configured ÷ the platform's most", cpuLimit, LIMITS.cpuMsPerInvocationMax),
    ...Object.entries(busy).map(([database, seconds]) =>
      limit(`D1 serial time per second, database "${database}" (each statement ≥ ${D1_STATEMENT_FLOOR_MS} ms)`, seconds, 1, D1_LIMITS),
    ),
    limit("D1 size after a year, largest database (GB)", d1GbPerDatabase, LIMITS.d1MaxDatabaseGb),
    limit(
      `queue consumers at once, each of ${deliveryQueues} delivery queues (${w.hangingEndpointShare * 100} % of endpoints hanging ${w.hangTimeoutSeconds} s)`,
      consumersPerQueue,
      LIMITS.queueConcurrentConsumers,
    ),
    limit("queue messages/s, the busiest queue", busiestQueueMessages, LIMITS.queueMessagesPerSecond),
    limit(
      "requests/s to the busiest key's object",
      w.busiestKeyRequestsPerSecond * Math.max(1, f.data_request_admitted.do_requests),
      LIMITS.objectRequestsPerSecond,
    ),
    limit("requests/s to one last-used shard", lastUsedShardRequestsPerSecond, LIMITS.objectRequestsPerSecond),
    limit("requests/s to the catalogue builder", builderRequestsPerSecond, LIMITS.objectRequestsPerSecond),
    limit("requests/s to one stream hub", hubRequestsPerSecond, LIMITS.objectRequestsPerSecond),
    limit("R2 writes/s to the snapshot's manifest key", ingestionsPerSecond, LIMITS.r2WritesPerSecondPerKey),
    limit(
      "events archived per day: what the cron must move ÷ what it can",
      eventsPerDay,
      EVENT_ARCHIVE_OBJECTS_PER_RUN * EVENTS_PER_ARCHIVE_OBJECT * 1440,
      "src/events/retention.ts",
    ),
    limit(
      "products whose history is archived per day: what the cron must move ÷ what it can",
      (w.products * (1 - Math.exp(-(eventsPerDay / w.products) * ((HISTORY_ARCHIVE_AFTER_MS - HISTORY_IN_D1_MS) / DAY_MS)))) /
        ((HISTORY_ARCHIVE_AFTER_MS - HISTORY_IN_D1_MS) / DAY_MS),
      HISTORY_ARCHIVE_PRODUCTS_PER_RUN * 1440,
      "src/events/retention.ts",
    ),
    limit(
      "webhooks whose attempts are archived per run: what the cron must move ÷ what it can",
      webhooksDuePerRun,
      Math.min(DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN, webhooksFoundPerRun),
      "src/events/retention.ts",
    ),
    limit(
      "delivery attempts archived per run: what the cron must move ÷ what it can",
      w.deliveriesPerSecond * 60,
      DELIVERY_ARCHIVE_ROWS_PER_RUN,
      "src/events/retention.ts",
    ),
    ...invocationLimits,
  ].sort((a, b) => b.ratio - a.ratio);

  return {
    inputs: `docs/costs.json@${costs.commit}`,
    /** False for a docs/costs.json measured before the alert windows' database: all D1 time is then the main one's. */
    alertsTimeMeasured: costs.operations.cron_run.d1_ms_alerts !== undefined,
    plan: plan.name,
    rate,
    perSecond,
    d1BusyByDatabase: busy,
    d1BusyByOperation: busyByOperation,
    consumerConcurrency,
    d1Gb,
    d1GbByTable,
    d1GbByDatabase,
    r2Gb,
    cost,
    monthly,
    perMillionRequests: monthly / (requests / 1e6),
    limits,
  };
}

export type Model = ReturnType<typeof simulate>;

function print(w: Workload, r: Model) {
  const n = (x: number, digits = 0) => x.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const usd = (x: number) => `$${n(x, 2)}`;
  const lines = [
    `Model: ${n(w.keys)} keys, ${n(w.requestsPerSecond)} requests/s, ${n(w.products)} products, ${n(w.eventsPerSecond, 1)} events/s, ` +
      `${n(w.deliveriesPerSecond)} deliveries/s, ${n(w.webhooks)} webhooks, ${n(w.openStreams)} open streams, for a year.`,
    `Inputs: ${r.inputs} (npm run bench -- --costs); D1: ${r.plan}.`,
    ...(r.alertsTimeMeasured
      ? []
      : [
          "  (this docs/costs.json has no d1_ms_alerts: it predates the alert windows' database, whose D1 time is counted on the main one)",
        ]),
    "",
    "Per second",
    ...COST_FIELDS.filter((field) => field !== "cpu_ms").map((field) => `  ${field.padEnd(44)} ${n(r.perSecond[field], 1)}`),
    `  ${"worker CPU ms".padEnd(44)} ${n(r.perSecond.cpu_ms, 0)}`,
    ...Object.entries(r.d1BusyByDatabase).map(([db, s]) => `  ${`D1 busy seconds, "${db}"`.padEnd(44)} ${n(s, 2)}`),
    `  ${"queue consumers at once, all queues".padEnd(44)} ${n(r.consumerConcurrency, 0)}`,
    "D1 busy seconds a second by operation, the 6 highest",
    ...Object.entries(r.d1BusyByOperation)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 6)
      .map(([name, seconds]) => `  ${name.padEnd(44)} ${n(seconds, 3)}`),
    `Storage after a year: D1 ${n(r.d1Gb, 1)} GB, R2 ${n(r.r2Gb, 1)} GB`,
    `  D1 by table (GB): ${Object.entries(r.d1GbByTable)
      .map(([table, gb]) => `${table} ${n(gb, 2)}`)
      .join(", ")}`,
    `  D1 by database (GB, each shard): ${Object.entries(r.d1GbByDatabase)
      .map(([db, gb]) => `${db} ${n(gb, 2)}`)
      .join(", ")}`,
    "",
    "Cost per month at list prices",
    ...Object.entries(r.cost).map(([what, dollars]) => `  ${what.padEnd(44)} ${usd(dollars)}`),
    `  ${"total".padEnd(44)} ${usd(r.monthly)}`,
    `  ${"per million API requests".padEnd(44)} ${usd(r.perMillionRequests)}`,
    "",
    "Limits, used ÷ limit, highest first (aim: at most 0.5 for the whole year); the 12 highest:",
    ...r.limits.slice(0, 12).map((x) => `  ${n(x.ratio, 2).padStart(9)}×  ${x.name}: ${n(x.used, 2)} of ${n(x.limit)}  (${x.source})`),
  ];
  console.log(lines.join("\n"));
}

/** The machine-readable form: the inputs' commit, every limit, and the cost per million requests. */
export function asJson(r: Model) {
  return {
    inputs: r.inputs,
    limits: r.limits.map(({ name, used, limit, ratio }) => ({ name, used, limit, ratio })),
    cost_per_million_requests: r.perMillionRequests,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      json: { type: "boolean", default: false },
      scale: { type: "string", default: "1" },
      plan: { type: "string", default: "base" },
    },
  });
  const factor = Number(values.scale);
  const plan = PLANS[values.plan];
  if (!(factor > 0) || !plan) {
    console.error(`--scale takes a positive number, --plan one of ${Object.keys(PLANS).join(", ")}.`);
    process.exit(2);
  }
  const workload = scaled(WORKLOAD, factor);
  const result = simulate(readCosts(), workload, plan);
  if (values.json) console.log(JSON.stringify(asJson(result)));
  else print(workload, result);
}
