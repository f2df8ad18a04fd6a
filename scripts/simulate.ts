/**
 * `npm run simulate`: the price-data API at a million keys for a year, on paper. A model, not a
 * measurement: its inputs are Cloudflare's published limits and list prices (docs/scale.md names the
 * pages), the workload, and the design's own costs. Where the code has the number (how long events and
 * history stay in D1, how much the cron moves per run, what a feed page may read), it is imported from
 * src/events/retention.ts, not typed here again. Change INPUTS and run it again;
 * `npm run simulate -- --json` prints `{"limits":[{name,used,limit,ratio}],"cost_per_million_requests"}`.
 */
import { readFileSync } from "node:fs";
import { FLUSH_EVERY_MS, LAST_USED_SHARDS } from "../src/api-keys/object/last-used-schedule.ts";
import {
  D1_QUERIES_PER_DELIVERY_BATCH,
  D1_QUERIES_PER_FEED_PAGE,
  D1_QUERIES_PER_HISTORY_READ,
  DELIVERIES_IN_D1_MS,
  DELIVERY_ARCHIVE_AFTER_MS,
  DELIVERY_ARCHIVE_PAGE,
  DELIVERY_ARCHIVE_ROWS_PER_RUN,
  DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN,
  EVENT_ARCHIVE_OBJECTS_PER_RUN,
  EVENT_ARCHIVE_READS_PER_PAGE,
  EVENTS_IN_D1_MS,
  EVENTS_PER_ARCHIVE_OBJECT,
  HISTORY_ARCHIVE_AFTER_MS,
  HISTORY_ARCHIVE_PRODUCTS_PER_RUN,
  HISTORY_IN_D1_MS,
  RETENTION_MS,
} from "../src/events/retention.ts";
import { DAY_MS, DAY_SECONDS } from "../src/platform/time.ts";

/** The delivery queue's consumer batch size, as wrangler.toml sets it (the first consumer is WEBHOOK_QUEUE's). */
export function queueBatchSize(toml = readFileSync(new URL("../wrangler.toml", import.meta.url), "utf8")): number {
  const size = /\[\[queues\.consumers\]\][^[]*?max_batch_size\s*=\s*(\d+)/.exec(toml)?.[1];
  if (!size) throw new Error("wrangler.toml: no max_batch_size in [[queues.consumers]]");
  return Number(size);
}

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
    /** Share of API requests that are GET /events pages, and of those the share reaching back past D1's day (read from R2). */
    feedShare: number;
    feedFromArchiveShare: number;
    /** Share of API requests that are GET /products/:id/history, and the calendar years (archive objects) one reads. */
    historyShare: number;
    historyYearsRead: number;
    /** Deliveries per queue batch (wrangler.toml's max_batch_size): the consumer's D1 round trips are per batch. */
    deliveriesPerQueueBatch: number;
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
    productsPerSegment: number;
    gzipBytesPerProduct: number;
    /** D1 bytes per stored row (data and indexes), by table. */
    d1BytesPerProduct: number;
    d1BytesPerOffer: number;
    d1BytesPerHistoryRow: number;
    d1BytesPerEvent: number;
    d1BytesPerKey: number;
    d1BytesPerDelivery: number;
    /** Days the delivery archive keeps attempts in R2 (the bucket's lifecycle rule on deliveries/). */
    deliveryArchiveDays: number;
    r2BytesPerArchivedDelivery: number;
    /** Gzip NDJSON bytes in R2 per archived event and history row. */
    r2BytesPerArchivedEvent: number;
    r2BytesPerArchivedHistoryRow: number;
    /** D1 rows written per event: the change row, its history row, the outbox row, the relay's sent mark. */
    d1RowsWrittenPerEvent: number;
    /** D1 queries per event on the consumer's side (claim, fan-out read, mark), amortised over a queue batch of 10. */
    d1QueriesPerEventFanOut: number;
    /** D1 queries of one cron run outside the archive (outbox sweep, catalogue sweep). */
    d1QueriesPerCronRunBesidesArchive: number;
  };
  limits: {
    /** Writing requests a second one object serves (production, replicated storage): low and high. */
    objectWritesPerSecond: [number, number];
    d1MaxDatabaseGb: number;
    /** D1 runs one query at a time per database: about 1,000 queries/s at 1 ms each. */
    d1QueriesPerSecond: number;
    queueMessagesPerSecond: number;
    r2WritesPerSecondPerKey: number;
    /** Per invocation (request, cron run): D1 queries, subrequests (R2 operations count), CPU ms. */
    d1QueriesPerInvocation: number;
    subrequestsPerInvocation: number;
    cronsPerDay: number;
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
    feedShare: 0.005,
    feedFromArchiveShare: 0.1,
    historyShare: 0.005,
    historyYearsRead: 2,
    deliveriesPerQueueBatch: queueBatchSize(),
  },
  design: {
    objectRowsWrittenPerAdmission: 1.1,
    objectIdleSeconds: 70,
    objectActiveMsPerCall: 10,
    objectMemoryGb: 0.128,
    objectStorageBytesPerKey: 24_000,
    productsPerSegment: 1_000,
    gzipBytesPerProduct: 250,
    d1BytesPerProduct: 600,
    d1BytesPerOffer: 300,
    d1BytesPerHistoryRow: 120,
    d1BytesPerEvent: 400,
    d1BytesPerKey: 300,
    d1BytesPerDelivery: 150,
    deliveryArchiveDays: 31,
    r2BytesPerArchivedDelivery: 60,
    r2BytesPerArchivedEvent: 120,
    r2BytesPerArchivedHistoryRow: 40,
    d1RowsWrittenPerEvent: 4,
    d1QueriesPerEventFanOut: 0.3,
    d1QueriesPerCronRunBesidesArchive: 10,
  },
  limits: {
    objectWritesPerSecond: [200, 500],
    d1MaxDatabaseGb: 10,
    d1QueriesPerSecond: 1_000,
    queueMessagesPerSecond: 5_000,
    r2WritesPerSecondPerKey: 1,
    d1QueriesPerInvocation: 1_000,
    subrequestsPerInvocation: 1_000,
    cronsPerDay: 1_440,
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

const MONTH_SECONDS = 30 * DAY_SECONDS;
const GB = 1e9;

/** Monthly cost of `used` units with `included` free and `perMillion` dollars per million beyond. */
export const overage = (used: number, included: number, perMillion: number) => (Math.max(0, used - included) / 1e6) * perMillion;

export interface Limit {
  name: string;
  used: number;
  limit: number;
  /** used ÷ limit: above 1 the design breaks there; the aim is under 0.5 for the whole year. */
  ratio: number;
  /** What would change at that point (or what already did). */
  change: string;
}

export function simulate(i: Inputs = INPUTS) {
  const w = i.workload;
  const d = i.design;
  const p = i.prices;
  const L = i.limits;
  const perKeyRate = w.requestsPerSecond / w.keys;
  const admittedPerSecond = w.requestsPerSecond * (1 - w.refusedShare);

  // Objects: a key's object is in memory when it had a request within the idle window (Poisson arrivals).
  const inMemory = (window: number) => 1 - Math.exp(-perKeyRate * window);
  const objectsAlive = w.keys * inMemory(d.objectIdleSeconds);
  const objectWritesPerSecond = admittedPerSecond * d.objectRowsWrittenPerAdmission;
  // The busiest object serves one key, which its own plan caps: Premium's 300 a minute.
  const busiestKeyWritesPerSecond = (300 / 60) * d.objectRowsWrittenPerAdmission;

  // Events and deliveries.
  const eventsPerDay = w.products * w.offersPerProduct * w.changesPerOfferPerDay;
  const eventsPerSecond = eventsPerDay / DAY_SECONDS;
  const deliveriesPerSecond = eventsPerSecond * w.webhooks * w.webhookMatchShare;
  const queueMessagesPerSecond = eventsPerSecond + deliveriesPerSecond;

  // D1 queries/s: last_used_at, one statement per shard flush whatever the number of keys (src/api-keys/object/last-used.ts);
  // ingestion (its batch's share of one statement) and the relay's mark; the consumer's claims and records; reads.
  const lastUsedWritesPerSecond = LAST_USED_SHARDS / (FLUSH_EVERY_MS / 1000);
  const feedPerSecond = w.requestsPerSecond * w.feedShare;
  const historyPerSecond = w.requestsPerSecond * w.historyShare;
  const d1ReadQueriesPerSecond = feedPerSecond * D1_QUERIES_PER_FEED_PAGE + historyPerSecond * D1_QUERIES_PER_HISTORY_READ;
  // A queue batch's deliveries: one read of their webhooks, one batch recording their attempts (src/webhooks/delivery/store.ts).
  const deliveryRecordsPerSecond = (deliveriesPerSecond / w.deliveriesPerQueueBatch) * D1_QUERIES_PER_DELIVERY_BATCH;
  // The cron: besides its sweeps, each archive object costs a read and a batch, the history step three queries.
  const cronQueriesPerRun = d.d1QueriesPerCronRunBesidesArchive + 2 * EVENT_ARCHIVE_OBJECTS_PER_RUN + 2 + 3;
  // The delivery archive (its own cron trigger, src/webhooks/delivery/delivery-archive.ts): a webhook's attempts leave D1 about once
  // per (after − keep); a run reads the oldest rows once, then pages of its webhooks' rows, each page one R2 write per webhook and one delete.
  const deliveriesPerDay = deliveriesPerSecond * DAY_SECONDS;
  const deliveryCycleDays = (DELIVERY_ARCHIVE_AFTER_MS - DELIVERIES_IN_D1_MS) / DAY_MS;
  const deliveriesPerWebhookPerDay = deliveriesPerDay / w.webhooks;
  const webhooksArchivedPerDay = (w.webhooks * (1 - Math.exp(-deliveriesPerWebhookPerDay * deliveryCycleDays))) / deliveryCycleDays;
  const deliveryRowsPerRun = deliveriesPerDay / L.cronsPerDay;
  const deliveryPagesPerRun = Math.ceil(Math.min(deliveryRowsPerRun, DELIVERY_ARCHIVE_ROWS_PER_RUN) / DELIVERY_ARCHIVE_PAGE);
  const deliveryArchiveQueriesPerRun = 1 + 2 * deliveryPagesPerRun;
  const deliveryArchiveSubrequestsPerRun = DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN + deliveryPagesPerRun + deliveryArchiveQueriesPerRun;
  const d1QueriesPerSecond =
    lastUsedWritesPerSecond +
    eventsPerSecond * (2 + d.d1QueriesPerEventFanOut) +
    deliveryRecordsPerSecond +
    d1ReadQueriesPerSecond +
    ((cronQueriesPerRun + deliveryArchiveQueriesPerRun) * L.cronsPerDay) / DAY_SECONDS;
  // An attempt's row is written, then deleted when it moves to R2 (a delete counts as a row written).
  const d1WritesPerSecond = lastUsedWritesPerSecond + eventsPerSecond * d.d1RowsWrittenPerEvent + 2 * deliveriesPerSecond;

  // D1 size after a year: the catalogue and keys; events of the last day (plus the archive's index);
  // history of at most HISTORY_ARCHIVE_AFTER_MS (a product's oldest row that old sends it to R2).
  const historyRowsPerDay = eventsPerDay; // one history row per price or stock change
  const d1CatalogueGb =
    (w.products * d.d1BytesPerProduct + w.products * w.offersPerProduct * d.d1BytesPerOffer + w.keys * d.d1BytesPerKey) / GB;
  const d1EventsGb =
    (((eventsPerDay * EVENTS_IN_D1_MS) / DAY_MS) * d.d1BytesPerEvent) / GB +
    (((eventsPerDay * RETENTION_MS) / DAY_MS / EVENTS_PER_ARCHIVE_OBJECT) * 100) / GB;
  const d1HistoryGb = (((historyRowsPerDay * HISTORY_ARCHIVE_AFTER_MS) / DAY_MS) * d.d1BytesPerHistoryRow) / GB;
  // Attempts stay in D1 at most DELIVERY_ARCHIVE_AFTER_MS (a webhook whose oldest is that old has them moved).
  const d1DeliveriesGb = (deliveriesPerSecond * (DELIVERY_ARCHIVE_AFTER_MS / 1000) * d.d1BytesPerDelivery) / GB;
  const d1Gb = d1CatalogueGb + d1EventsGb + d1HistoryGb + d1DeliveriesGb;

  // The cron's archive: can it keep up, inside one invocation's limits?
  const eventArchiveCapacityPerDay = EVENT_ARCHIVE_OBJECTS_PER_RUN * EVENTS_PER_ARCHIVE_OBJECT * L.cronsPerDay;
  // A product is archived when its oldest D1 row is `after` old and keeps `keep`: about once per (after − keep).
  const archiveCycleDays = (HISTORY_ARCHIVE_AFTER_MS - HISTORY_IN_D1_MS) / DAY_MS;
  const changesPerProductPerDay = w.offersPerProduct * w.changesPerOfferPerDay;
  const productsArchivedPerDay = (w.products * (1 - Math.exp(-changesPerProductPerDay * archiveCycleDays))) / archiveCycleDays;
  const historyArchiveCapacityPerDay = HISTORY_ARCHIVE_PRODUCTS_PER_RUN * L.cronsPerDay;
  // One R2 read and one write per product-year (a run rarely spans a new year), events' writes, expiry's delete, the catalogue sweep's few.
  const cronSubrequestsPerRun = 2 * HISTORY_ARCHIVE_PRODUCTS_PER_RUN * 1.05 + EVENT_ARCHIVE_OBJECTS_PER_RUN + 1 + 10;

  // R2: a full list reads the manifest and every segment; a batch rewrites the segments it touches and the manifest.
  const segments = Math.ceil(w.products / d.productsPerSegment);
  const fullListsPerSecond = w.requestsPerSecond * w.fullCatalogueShare;
  const versionChecksPerSecond = w.isolates;
  const archiveReadsPerSecond = feedPerSecond * w.feedFromArchiveShare * 1.5 + historyPerSecond * w.historyYearsRead;
  const r2ReadsPerSecond =
    fullListsPerSecond * (segments + 1) + versionChecksPerSecond + archiveReadsPerSecond + (productsArchivedPerDay * 1.05) / DAY_SECONDS;
  const batchesPerSecond = eventsPerSecond / w.changesPerIngestBatch;
  const segmentsTouchedPerBatch = segments * (1 - Math.exp(-w.changesPerIngestBatch / segments));
  const archiveWritesPerSecond =
    (eventsPerDay / EVENTS_PER_ARCHIVE_OBJECT +
      productsArchivedPerDay * 1.05 +
      webhooksArchivedPerDay +
      deliveryPagesPerRun * L.cronsPerDay) /
    DAY_SECONDS;
  const r2WritesPerSecond = batchesPerSecond * (segmentsTouchedPerBatch + 1) + archiveWritesPerSecond;
  const manifestWritesPerSecond = batchesPerSecond;
  // Archive keys are each written at most once a cron run (a product-year once per run; an event object once).
  const archiveKeyWritesPerSecond = 1 / (DAY_SECONDS / L.cronsPerDay);
  const r2Gb =
    (w.products * d.gzipBytesPerProduct * 2 +
      ((eventsPerDay * RETENTION_MS) / DAY_MS) * d.r2BytesPerArchivedEvent +
      historyRowsPerDay * 365 * d.r2BytesPerArchivedHistoryRow +
      deliveriesPerDay * d.deliveryArchiveDays * d.r2BytesPerArchivedDelivery) /
    GB;

  // A feed page: its D1 queries, and its R2 reads (a cursor's object, then up to the page's budget).
  const feedSubrequests = D1_QUERIES_PER_FEED_PAGE + 2 * EVENT_ARCHIVE_READS_PER_PAGE;

  // Cost per month at list prices.
  const requests = w.requestsPerSecond * MONTH_SECONDS;
  const cost = {
    workers:
      p.workersMonthly +
      overage(requests, p.workersIncludedRequests, p.workersPerMillionRequests) +
      overage(requests * w.cpuMsPerRequest, p.workersIncludedCpuMs, p.workersPerMillionCpuMs),
    objectRequests: overage(requests, p.objectIncludedRequests, p.objectPerMillionRequests),
    objectDuration: overage(
      requests * (d.objectActiveMsPerCall / 1000) * d.objectMemoryGb,
      p.objectIncludedGbSeconds,
      p.objectPerMillionGbSeconds,
    ),
    objectRowsWritten: overage(objectWritesPerSecond * MONTH_SECONDS, p.objectIncludedRowsWritten, p.objectPerMillionRowsWritten),
    objectStorage: Math.max(0, (w.keys * d.objectStorageBytesPerKey) / GB - p.objectIncludedStorageGb) * p.objectPerGbMonth,
    d1:
      overage(eventsPerDay * 30, p.d1IncludedRowsRead, p.d1PerMillionRowsRead) +
      overage(d1WritesPerSecond * MONTH_SECONDS, p.d1IncludedRowsWritten, p.d1PerMillionRowsWritten) +
      Math.max(0, d1Gb - p.d1IncludedStorageGb) * p.d1PerGbMonth,
    r2:
      overage(r2WritesPerSecond * MONTH_SECONDS, p.r2IncludedClassA, p.r2PerMillionClassA) +
      overage(r2ReadsPerSecond * MONTH_SECONDS, p.r2IncludedClassB, p.r2PerMillionClassB) +
      Math.max(0, r2Gb - p.r2IncludedStorageGb) * p.r2PerGbMonth,
    queues: overage(
      queueMessagesPerSecond * MONTH_SECONDS * p.queuesOperationsPerMessage,
      p.queuesIncludedOperations,
      p.queuesPerMillionOperations,
    ),
  };
  const monthly = Object.values(cost).reduce((a, b) => a + b, 0);

  const limit = (name: string, used: number, max: number, change: string): Limit => ({ name, used, limit: max, ratio: used / max, change });
  const limits: Limit[] = [
    limit(
      "D1 queries/s (one database runs one query at a time)",
      d1QueriesPerSecond,
      L.d1QueriesPerSecond,
      `last_used_at ${Math.round(lastUsedWritesPerSecond)}/s, delivery records ${Math.round(deliveryRecordsPerSecond)}/s (${D1_QUERIES_PER_DELIVERY_BATCH} a queue batch of ${w.deliveriesPerQueueBatch}), feed and history ${Math.round(d1ReadQueriesPerSecond)}/s, events ${Math.round(eventsPerSecond * (2 + d.d1QueriesPerEventFanOut))}/s. ` +
        "Next: larger queue batches (round trips fall with the batch size), then the delivery log in a D1 database of its own",
    ),
    limit(
      "D1 size after a year: catalogue, keys, the last day of events, the last days of history, the last minutes of delivery attempts (GB)",
      d1Gb,
      L.d1MaxDatabaseGb,
      `catalogue and keys ${d1CatalogueGb.toFixed(1)} GB, events ${d1EventsGb.toFixed(2)} GB, history ${d1HistoryGb.toFixed(2)} GB, delivery attempts ${d1DeliveriesGb.toFixed(2)} GB: bounded by the catalogue and the delivery rate, not by time (events after ${EVENTS_IN_D1_MS / DAY_MS} day, history after ${HISTORY_ARCHIVE_AFTER_MS / DAY_MS} days, a webhook's attempts once its oldest is ${DELIVERY_ARCHIVE_AFTER_MS / 60_000} minutes old move to R2). At twice the catalogue or the delivery rate: shard D1 (the delivery log in a database of its own first)`,
    ),
    limit(
      "webhooks whose attempts the delivery archive moves per day: what it must ÷ what it can",
      webhooksArchivedPerDay,
      DELIVERY_ARCHIVE_WEBHOOKS_PER_RUN * L.cronsPerDay,
      "more webhooks per run (each one R2 write: subrequests, below), or a longer wait before a webhook's attempts move (D1 size, above)",
    ),
    limit(
      "delivery attempts the delivery archive moves per day: what it must ÷ what it can",
      deliveriesPerDay,
      DELIVERY_ARCHIVE_ROWS_PER_RUN * L.cronsPerDay,
      "more rows per run (CPU: ≈ 1 s of gzip per 150,000), or the archive on a Durable Object alarm that runs more often",
    ),
    limit(
      "subrequests per delivery-archive run (its own cron trigger; 1,000 per invocation)",
      deliveryArchiveSubrequestsPerRun,
      L.subrequestsPerInvocation,
      "a second trigger splitting the webhooks by id",
    ),
    limit(
      "writes/s of the busiest key's object (Premium caps a key at 5 req/s)",
      busiestKeyWritesPerSecond,
      L.objectWritesPerSecond[0],
      "none needed: one object per key spreads the writes; an enterprise plan above ~100 req/s per key would need permits leased to isolates",
    ),
    limit(
      "queue messages/s (5,000 per queue)",
      queueMessagesPerSecond,
      L.queueMessagesPerSecond,
      "a second delivery queue sharded by webhook id, or one delivery message per webhook per batch of events",
    ),
    limit(
      "R2 writes/s to the manifest key (1 per second per key)",
      manifestWritesPerSecond,
      L.r2WritesPerSecondPerKey,
      "publish at most one manifest a second: coalesce ingestion batches before the snapshot step",
    ),
    limit(
      "R2 writes/s to one archive key (an event object or a product-year: at most once a cron run)",
      archiveKeyWritesPerSecond,
      L.r2WritesPerSecondPerKey,
      "none needed",
    ),
    limit(
      "events archived per day: what the cron must move ÷ what it can",
      eventsPerDay,
      eventArchiveCapacityPerDay,
      "more objects per run (each costs 2 D1 queries and 1 R2 write)",
    ),
    limit(
      "products whose history is archived per day: what the cron must move ÷ what it can",
      productsArchivedPerDay,
      historyArchiveCapacityPerDay,
      "more products per run costs subrequests (below); past that, a Durable Object alarm that archives more often than once a minute",
    ),
    limit("D1 queries per cron run (1,000 per invocation)", cronQueriesPerRun, L.d1QueriesPerInvocation, "none needed"),
    limit(
      "subrequests per cron run (1,000 per invocation; R2 operations count)",
      cronSubrequestsPerRun,
      L.subrequestsPerInvocation,
      "fewer products per run, and a Durable Object alarm to run more often",
    ),
    limit("subrequests per GET /events page (1,000 per invocation)", feedSubrequests, L.subrequestsPerInvocation, "none needed"),
  ].sort((a, b) => b.ratio - a.ratio);

  return {
    perKeyRate,
    objectsAlive,
    objectWritesPerSecond,
    busiestKeyWritesPerSecond,
    eventsPerSecond,
    lastUsedWritesPerSecond,
    deliveryRecordsPerSecond,
    webhooksArchivedPerDay,
    d1ReadQueriesPerSecond,
    versionChecksPerSecond,
    d1WritesPerSecond,
    d1QueriesPerSecond,
    d1Gb,
    d1DeliveriesGb,
    segments,
    r2ReadsPerSecond,
    r2WritesPerSecond,
    manifestWritesPerSecond,
    r2Gb,
    deliveriesPerSecond,
    queueMessagesPerSecond,
    productsArchivedPerDay,
    cost,
    monthly,
    perMillionRequests: monthly / (requests / 1e6),
    limits,
  };
}

function print(i: Inputs, r: ReturnType<typeof simulate>) {
  const n = (x: number, digits = 0) => x.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const usd = (x: number) => `$${n(x, 2)}`;
  const w = i.workload;
  const lines = [
    `Model: ${n(w.keys)} keys, ${n(w.requestsPerSecond)} requests/s worldwide, ${n(w.products)} products, ${n(w.webhooks)} webhooks, for a year (edit INPUTS in scripts/simulate.ts).`,
    "",
    "Durable Objects (one per key)",
    `  objects alive (a request within the last ${i.design.objectIdleSeconds} s)  ${n(r.objectsAlive)}`,
    `  rows written/s (${i.design.objectRowsWrittenPerAdmission} per admission)         ${n(r.objectWritesPerSecond)}`,
    "D1",
    `  events/s                                     ${n(r.eventsPerSecond, 1)}`,
    `  last_used_at writes/s                        ${n(r.lastUsedWritesPerSecond)}`,
    `  delivery records/s                           ${n(r.deliveryRecordsPerSecond)}`,
    `  feed and history queries/s                   ${n(r.d1ReadQueriesPerSecond)}`,
    `  queries/s in all                             ${n(r.d1QueriesPerSecond)}`,
    `  size (catalogue, keys, recent events/history/attempts) ${n(r.d1Gb, 1)} GB, of which delivery attempts ${n(r.d1DeliveriesGb, 2)} GB`,
    "R2",
    `  segments                                     ${n(r.segments)}`,
    `  reads/s                                      ${n(r.r2ReadsPerSecond, 1)}`,
    `  writes/s (segments, manifests, archive)      ${n(r.r2WritesPerSecond, 2)}; manifest ${n(r.manifestWritesPerSecond, 2)}/s`,
    `  stored after a year                          ${n(r.r2Gb, 1)} GB`,
    "Queues",
    `  messages/s (events + deliveries)             ${n(r.queueMessagesPerSecond, 1)} (${n(r.deliveriesPerSecond, 1)} deliveries)`,
    "",
    "Cost per month at list prices",
    ...Object.entries(r.cost).map(([what, dollars]) => `  ${what.padEnd(44)} ${usd(dollars)}`),
    `  ${"total".padEnd(44)} ${usd(r.monthly)}`,
    `  per million API requests                     ${usd(r.perMillionRequests)}`,
    "",
    "Every limit, used ÷ limit, highest first (aim: under 0.5 for the whole year)",
    ...r.limits.map((x) => `  ${n(x.ratio, 2).padStart(9)}×  ${x.name}: ${n(x.used, 2)} of ${n(x.limit)}\n              ${x.change}`),
  ];
  console.log(lines.join("\n"));
}

/** The machine-readable form: every limit, and the cost per million requests. */
export function asJson(r: ReturnType<typeof simulate>) {
  return {
    limits: r.limits.map(({ name, used, limit, ratio }) => ({ name, used, limit, ratio })),
    cost_per_million_requests: r.perMillionRequests,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = simulate(INPUTS);
  if (process.argv.includes("--json")) console.log(JSON.stringify(asJson(result)));
  else print(INPUTS, result);
}
