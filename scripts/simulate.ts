/**
 * `npm run simulate`: the price-data API at a million keys, on paper. A model, not a measurement:
 * its inputs are Cloudflare's published limits and list prices (docs/scale.md names the pages) and
 * the design's own costs (src/: one rate-limit object per key, a catalogue snapshot in R2 segments,
 * events through a D1 outbox to a queue). Change INPUTS and run it again.
 */

export interface Inputs {
  workload: {
    keys: number;
    /** API requests per second, worldwide, spread evenly over the keys. */
    requestsPerSecond: number;
    /** Share of requests refused with 429 (a refusal writes nothing). */
    refusedShare: number;
    products: number;
    offersPerProduct: number;
    /** Price or stock changes per offer per day; each is one event. */
    changesPerOfferPerDay: number;
    /** Changes arrive in ingestion batches of this size (one snapshot rebuild per batch). */
    changesPerIngestBatch: number;
    webhooks: number;
    /** Share of webhooks an event matches (its type, product and min_change_pct). */
    webhookMatchShare: number;
    /** Share of API requests that are the unfiltered full catalogue (GET /products). */
    fullCatalogueShare: number;
    /** Isolates serving worldwide at this rate (each reads the catalogue snapshot's pointer in R2 once a second). */
    isolates: number;
    /** Worker CPU per request (ms); measured locally by `npm run bench`, production is usually lower. */
    cpuMsPerRequest: number;
  };
  design: {
    /** Rows written in the key's object per admission: its one state row (minute log, counters, this minute's usage); plus one usage row per active minute, amortised. */
    objectRowsWrittenPerAdmission: number;
    /** A key's object stays in memory this long after its last request before it is evicted. */
    objectIdleSeconds: number;
    /** Wall time an object is active per call, for duration billing (its answer waits for the storage flush). */
    objectActiveMsPerCall: number;
    objectMemoryGb: number;
    objectStorageBytesPerKey: number;
    /** `last_used_at` goes to D1 at most once a minute per key (the object keeps when it last did, across evictions). */
    lastUsedIntervalSeconds: number;
    productsPerSegment: number;
    gzipBytesPerProduct: number;
    /** D1 bytes per stored row (data and indexes), by table. */
    d1BytesPerProduct: number;
    d1BytesPerOffer: number;
    d1BytesPerHistoryRow: number;
    d1BytesPerEvent: number;
    d1BytesPerKey: number;
    /** History rows and events are kept this many days (events: 30 by the contract; history: forever today). */
    historyDays: number;
    eventDays: number;
    /** D1 rows written per event: the change row, its history row, the outbox row, the relay's sent mark. */
    d1RowsWrittenPerEvent: number;
  };
  limits: {
    /** Writing requests a second one object serves (production, replicated storage): low and high. */
    objectWritesPerSecond: [number, number];
    d1MaxDatabaseGb: number;
    /** D1 runs one query at a time per database: about 1,000 queries/s at 1 ms each. */
    d1QueriesPerSecond: number;
    queueMessagesPerSecond: number;
    r2WritesPerSecondPerKey: number;
  };
  prices: {
    workersMonthly: number;
    workersIncludedRequests: number;
    workersPerMillionRequests: number;
    workersIncludedCpuMs: number;
    workersPerMillionCpuMs: number;
    objectIncludedRequests: number;
    objectPerMillionRequests: number;
    objectIncludedGbSeconds: number;
    objectPerMillionGbSeconds: number;
    objectIncludedRowsWritten: number;
    objectPerMillionRowsWritten: number;
    objectIncludedRowsRead: number;
    objectPerMillionRowsRead: number;
    objectIncludedStorageGb: number;
    objectPerGbMonth: number;
    d1IncludedRowsRead: number;
    d1PerMillionRowsRead: number;
    d1IncludedRowsWritten: number;
    d1PerMillionRowsWritten: number;
    d1IncludedStorageGb: number;
    d1PerGbMonth: number;
    r2IncludedClassA: number;
    r2PerMillionClassA: number;
    r2IncludedClassB: number;
    r2PerMillionClassB: number;
    r2IncludedStorageGb: number;
    r2PerGbMonth: number;
    queuesIncludedOperations: number;
    queuesPerMillionOperations: number;
    /** Operations per message: write, read, delete (per 64 KB). */
    queuesOperationsPerMessage: number;
  };
}

export const INPUTS: Inputs = {
  workload: {
    keys: 1_000_000,
    requestsPerSecond: 10_000,
    refusedShare: 0.05,
    products: 1_000_000,
    offersPerProduct: 5,
    changesPerOfferPerDay: 0.2,
    changesPerIngestBatch: 500,
    webhooks: 10_000,
    webhookMatchShare: 0.01,
    fullCatalogueShare: 0.0001,
    isolates: 2_000,
    cpuMsPerRequest: 1.4,
  },
  design: {
    objectRowsWrittenPerAdmission: 1.1,
    objectIdleSeconds: 70,
    objectActiveMsPerCall: 10,
    objectMemoryGb: 0.128,
    objectStorageBytesPerKey: 24_000,
    lastUsedIntervalSeconds: 60,
    productsPerSegment: 1_000,
    gzipBytesPerProduct: 250,
    d1BytesPerProduct: 600,
    d1BytesPerOffer: 300,
    d1BytesPerHistoryRow: 120,
    d1BytesPerEvent: 400,
    d1BytesPerKey: 300,
    historyDays: 365,
    eventDays: 30,
    d1RowsWrittenPerEvent: 4,
  },
  limits: {
    objectWritesPerSecond: [200, 500],
    d1MaxDatabaseGb: 10,
    d1QueriesPerSecond: 1_000,
    queueMessagesPerSecond: 5_000,
    r2WritesPerSecondPerKey: 1,
  },
  prices: {
    workersMonthly: 5,
    workersIncludedRequests: 10e6,
    workersPerMillionRequests: 0.3,
    workersIncludedCpuMs: 30e6,
    workersPerMillionCpuMs: 0.02,
    objectIncludedRequests: 1e6,
    objectPerMillionRequests: 0.15,
    objectIncludedGbSeconds: 400_000,
    objectPerMillionGbSeconds: 12.5,
    objectIncludedRowsWritten: 50e6,
    objectPerMillionRowsWritten: 1,
    objectIncludedRowsRead: 25e9,
    objectPerMillionRowsRead: 0.001,
    objectIncludedStorageGb: 5,
    objectPerGbMonth: 0.2,
    d1IncludedRowsRead: 25e9,
    d1PerMillionRowsRead: 0.001,
    d1IncludedRowsWritten: 50e6,
    d1PerMillionRowsWritten: 1,
    d1IncludedStorageGb: 5,
    d1PerGbMonth: 0.75,
    r2IncludedClassA: 1e6,
    r2PerMillionClassA: 4.5,
    r2IncludedClassB: 10e6,
    r2PerMillionClassB: 0.36,
    r2IncludedStorageGb: 10,
    r2PerGbMonth: 0.015,
    queuesIncludedOperations: 1e6,
    queuesPerMillionOperations: 0.4,
    queuesOperationsPerMessage: 3,
  },
};

const DAY = 86_400;
const MONTH = 30 * DAY;
const GB = 1e9;

/** Monthly cost of `used` units with `included` free and `perMillion` dollars per million beyond. */
export const overage = (used: number, included: number, perMillion: number) => (Math.max(0, used - included) / 1e6) * perMillion;

export interface Pressure {
  what: string;
  demand: number;
  limit: number;
  /** demand ÷ limit: above 1 the design breaks there. */
  load: number;
  change: string;
}

export function simulate(i: Inputs = INPUTS) {
  const w = i.workload;
  const d = i.design;
  const p = i.prices;
  const perKeyRate = w.requestsPerSecond / w.keys;
  const admittedPerSecond = w.requestsPerSecond * (1 - w.refusedShare);

  // Objects: a key's object is in memory when it had a request within the idle window (Poisson arrivals).
  const inMemory = (window: number) => 1 - Math.exp(-perKeyRate * window);
  const objectsAlive = w.keys * inMemory(d.objectIdleSeconds);
  const objectWritesPerSecond = admittedPerSecond * d.objectRowsWrittenPerAdmission;
  // The busiest object serves one key, which its own plan caps: Premium's 300 a minute.
  const busiestKeyWritesPerSecond = 300 / 60;

  // D1: last_used_at on a key's first request after a gap of more than the interval; events (the change, its history
  // row, the outbox row, the relay's mark). The catalogue's freshness check (each isolate once a second)
  // reads the snapshot's pointer in R2, not D1.
  const eventsPerSecond = (w.products * w.offersPerProduct * w.changesPerOfferPerDay) / DAY;
  const lastUsedWritesPerSecond = w.keys * perKeyRate * Math.exp(-perKeyRate * d.lastUsedIntervalSeconds);
  const versionChecksPerSecond = w.isolates;
  const d1WritesPerSecond = lastUsedWritesPerSecond + eventsPerSecond * d.d1RowsWrittenPerEvent;
  // Per event: the ingestion batch's share of one statement, and the relay's read and mark.
  const d1QueriesPerSecond = lastUsedWritesPerSecond + eventsPerSecond * 2;
  const d1RowsReadPerDay = eventsPerSecond * DAY;
  const d1Gb =
    (w.products * d.d1BytesPerProduct +
      w.products * w.offersPerProduct * d.d1BytesPerOffer +
      eventsPerSecond * DAY * d.historyDays * d.d1BytesPerHistoryRow +
      eventsPerSecond * DAY * d.eventDays * d.d1BytesPerEvent +
      w.keys * d.d1BytesPerKey) /
    GB;
  const d1DaysToFull = (i.limits.d1MaxDatabaseGb * GB - (w.products * (d.d1BytesPerProduct + w.offersPerProduct * d.d1BytesPerOffer) + w.keys * d.d1BytesPerKey)) / (eventsPerSecond * DAY * (d.d1BytesPerHistoryRow + d.d1BytesPerEvent));

  // R2: a full list reads the manifest and every segment; a batch rewrites the segments it touches and the manifest.
  const segments = Math.ceil(w.products / d.productsPerSegment);
  const fullListsPerSecond = w.requestsPerSecond * w.fullCatalogueShare;
  const r2ReadsPerSecond = fullListsPerSecond * (segments + 1) + versionChecksPerSecond;
  const batchesPerSecond = eventsPerSecond / w.changesPerIngestBatch;
  const segmentsTouchedPerBatch = segments * (1 - Math.exp(-w.changesPerIngestBatch / segments));
  const r2WritesPerSecond = batchesPerSecond * (segmentsTouchedPerBatch + 1);
  const manifestWritesPerSecond = batchesPerSecond;
  const r2Gb = (w.products * d.gzipBytesPerProduct * 2) / GB; // the serving snapshot and the one being built

  // Queues: one message per event, then one delivery message per matching webhook.
  const deliveriesPerSecond = eventsPerSecond * w.webhooks * w.webhookMatchShare;
  const queueMessagesPerSecond = eventsPerSecond + deliveriesPerSecond;

  // Cost per month at list prices.
  const requests = w.requestsPerSecond * MONTH;
  const cost = {
    workers: p.workersMonthly + overage(requests, p.workersIncludedRequests, p.workersPerMillionRequests) + overage(requests * w.cpuMsPerRequest, p.workersIncludedCpuMs, p.workersPerMillionCpuMs),
    objectRequests: overage(requests, p.objectIncludedRequests, p.objectPerMillionRequests),
    objectDuration: overage(requests * (d.objectActiveMsPerCall / 1000) * d.objectMemoryGb, p.objectIncludedGbSeconds, p.objectPerMillionGbSeconds),
    objectRowsWritten: overage(objectWritesPerSecond * MONTH, p.objectIncludedRowsWritten, p.objectPerMillionRowsWritten),
    objectStorage: Math.max(0, (w.keys * d.objectStorageBytesPerKey) / GB - p.objectIncludedStorageGb) * p.objectPerGbMonth,
    d1: overage(d1RowsReadPerDay * 30, p.d1IncludedRowsRead, p.d1PerMillionRowsRead) + overage(d1WritesPerSecond * MONTH, p.d1IncludedRowsWritten, p.d1PerMillionRowsWritten) + Math.max(0, d1Gb - p.d1IncludedStorageGb) * p.d1PerGbMonth,
    r2: overage(r2WritesPerSecond * MONTH, p.r2IncludedClassA, p.r2PerMillionClassA) + overage(r2ReadsPerSecond * MONTH, p.r2IncludedClassB, p.r2PerMillionClassB) + Math.max(0, r2Gb - p.r2IncludedStorageGb) * p.r2PerGbMonth,
    queues: overage(queueMessagesPerSecond * MONTH * p.queuesOperationsPerMessage, p.queuesIncludedOperations, p.queuesPerMillionOperations),
  };
  const monthly = Object.values(cost).reduce((a, b) => a + b, 0);

  const pressures: Pressure[] = [
    {
      what: "D1 queries/s (one database runs one query at a time)",
      demand: d1QueriesPerSecond,
      limit: i.limits.d1QueriesPerSecond,
      load: d1QueriesPerSecond / i.limits.d1QueriesPerSecond,
      change: "take last_used_at off D1's write path (the key's object keeps it; D1 gets it in one batched write per minute for all keys, or only when it moves by an hour) (the catalogue's freshness check already reads R2, not D1)",
    },
    {
      what: "D1 size (GB, 10 GB per database)",
      demand: d1Gb,
      limit: i.limits.d1MaxDatabaseGb,
      load: d1Gb / i.limits.d1MaxDatabaseGb,
      change: `move price history and events older than a few days to R2 (daily NDJSON segments) or shard D1 by product; at these rates D1 is full in ${Math.max(0, d1DaysToFull).toFixed(0)} days`,
    },
    {
      what: "R2 writes/s to the manifest key (1 per second per key)",
      demand: manifestWritesPerSecond,
      limit: i.limits.r2WritesPerSecondPerKey,
      load: manifestWritesPerSecond / i.limits.r2WritesPerSecondPerKey,
      change: "publish at most one manifest a second: coalesce ingestion batches before the snapshot step",
    },
    {
      what: "writes/s of the busiest key's object (Premium caps a key at 5 req/s)",
      demand: busiestKeyWritesPerSecond,
      limit: i.limits.objectWritesPerSecond[0],
      load: busiestKeyWritesPerSecond / i.limits.objectWritesPerSecond[0],
      change: "none needed: one object per key spreads the writes; an enterprise plan above ~200 req/s per key would need permits leased to isolates",
    },
    {
      what: "queue messages/s (5,000 per queue)",
      demand: queueMessagesPerSecond,
      limit: i.limits.queueMessagesPerSecond,
      load: queueMessagesPerSecond / i.limits.queueMessagesPerSecond,
      change: "a second delivery queue sharded by webhook id, or one delivery message per webhook per batch of events",
    },
  ].sort((a, b) => b.load - a.load);

  return {
    perKeyRate,
    objectsAlive,
    objectWritesPerSecond,
    busiestKeyWritesPerSecond,
    eventsPerSecond,
    lastUsedWritesPerSecond,
    versionChecksPerSecond,
    d1WritesPerSecond,
    d1QueriesPerSecond,
    d1RowsReadPerDay,
    d1Gb,
    d1DaysToFull,
    segments,
    r2ReadsPerSecond,
    r2WritesPerSecond,
    manifestWritesPerSecond,
    r2Gb,
    deliveriesPerSecond,
    queueMessagesPerSecond,
    cost,
    monthly,
    perMillionRequests: monthly / (requests / 1e6),
    pressures,
  };
}

function print(i: Inputs, r: ReturnType<typeof simulate>) {
  const n = (x: number, digits = 0) => x.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const usd = (x: number) => `$${n(x, 2)}`;
  const w = i.workload;
  const lines = [
    `Model: ${n(w.keys)} keys, ${n(w.requestsPerSecond)} requests/s worldwide, ${n(w.products)} products, ${n(w.webhooks)} webhooks (edit INPUTS in scripts/simulate.ts).`,
    "",
    "Durable Objects (one per key)",
    `  objects alive (a request within the last ${i.design.objectIdleSeconds} s)  ${n(r.objectsAlive)}`,
    `  rows written/s (${i.design.objectRowsWrittenPerAdmission} per admission)         ${n(r.objectWritesPerSecond)}`,
    `  busiest object: ${n(r.busiestKeyWritesPerSecond, 1)} admissions/s against ${i.limits.objectWritesPerSecond.join("–")} writing requests/s one object serves`,
    "D1",
    `  events/s                                     ${n(r.eventsPerSecond, 1)}`,
    `  last_used_at writes/s                        ${n(r.lastUsedWritesPerSecond)}`,
    `  catalogue pointer reads/s (R2, per isolate)  ${n(r.versionChecksPerSecond)}`,
    `  queries/s in all                             ${n(r.d1QueriesPerSecond)}`,
    `  rows read per day                            ${n(r.d1RowsReadPerDay)}`,
    `  size after ${i.design.historyDays} days of history           ${n(r.d1Gb, 1)} GB (full after ${n(Math.max(0, r.d1DaysToFull))} days)`,
    "R2",
    `  segments                                     ${n(r.segments)}`,
    `  reads/s (full lists × segments, pointers)    ${n(r.r2ReadsPerSecond, 1)}`,
    `  writes/s (segments + manifest per batch)     ${n(r.r2WritesPerSecond, 2)}; manifest ${n(r.manifestWritesPerSecond, 2)}/s`,
    "Queues",
    `  messages/s (events + deliveries)             ${n(r.queueMessagesPerSecond, 1)} (${n(r.deliveriesPerSecond, 1)} deliveries)`,
    "",
    "Cost per month at list prices",
    ...Object.entries(r.cost).map(([what, dollars]) => `  ${what.padEnd(44)} ${usd(dollars)}`),
    `  ${"total".padEnd(44)} ${usd(r.monthly)}`,
    `  per million API requests                     ${usd(r.perMillionRequests)}`,
    "",
    "Where it breaks first (demand ÷ limit, highest first)",
    ...r.pressures.map((x) => `  ${n(x.load, 2).padStart(7)}×  ${x.what}: ${n(x.demand, 2)} of ${n(x.limit)}\n            change: ${x.change}`),
  ];
  console.log(lines.join("\n"));
}

if (import.meta.url === `file://${process.argv[1]}`) print(INPUTS, simulate(INPUTS));
