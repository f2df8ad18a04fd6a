import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { archiveHistory } from "../../src/catalogue/history-archive.ts";
import { archiveEvents } from "../../src/events/archive.ts";
import { appendScheduledExports } from "../../src/exports/service.ts";
import { STEP_LIMITS } from "../../src/exports/steps.ts";
import { CATALOGUE_COLUMNS, CHANGE_COLUMNS } from "../../src/key-data/export-rows.ts";
import { database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { DAY_MS, HOUR_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, expectJson, utf8Text } from "../helpers/http.ts";
import { connectLake, duckdb, lakeDestination } from "../helpers/lake.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * The issue's headline: an export lands in a real S3-compatible bucket on this machine (s3rver), and DuckDB reading
 * that bucket's Parquet files returns exactly the rows the API serves: every offer and every field of the catalogue
 * (GET /products), every price.changed and stock.changed of a span (GET /events, and past the feed's 30 days the
 * products' history, GET /products/{id}/history). The worker runs here in workerd as in every workers test (its D1,
 * R2, objects and alarms); the bucket and DuckDB run in Node beside it (test/helpers/lake-server.ts), and the worker
 * reaches the bucket through the tests' stand-in host (test/helpers/lake.ts).
 */

type Row = Record<string, unknown>;
interface ExportDetail {
  id: string;
  status: string;
  rows: number;
  files: number;
  until: string | null;
  prefix: string;
  file_list: { path: string; rows: number }[];
}

const defaults = { ...STEP_LIMITS };
afterEach(() => {
  Object.assign(STEP_LIMITS, defaults);
  vi.restoreAllMocks();
});

let account: Awaited<ReturnType<typeof freshAccount>>;
beforeAll(async () => {
  account = await freshAccount({ plan: "premium" });
});

async function finished(id: string): Promise<ExportDetail> {
  let detail: ExportDetail | undefined;
  await vi.waitFor(
    async () => {
      detail = (await expectJson(await call("GET", `/exports/${id}`, { token: account.token }), 200)) as ExportDetail;
      expect(detail.status).not.toBe("running");
    },
    { timeout: 60_000, interval: 200 },
  );
  return detail!;
}

/** Every event of [since, until) as GET /events pages them (a page may stop early at its archive reads: follow the cursor). */
async function servedFeed(since: string, until: string) {
  const feed: (Row & { id: string; timestamp: string; data: Row })[] = [];
  for (let after: string | null = null; ; ) {
    const query: string = after ? `after=${after}` : `since=${encodeURIComponent(since)}`;
    const page = (await expectJson(await call("GET", `/events?${query}&limit=1000`, { token: account.key }), 200)) as {
      events: (Row & { id: string; timestamp: string; data: Row })[];
      next_cursor: string | null;
    };
    feed.push(...page.events.filter((e) => e.timestamp < until));
    if (page.events.length === 0 || !page.next_cursor) return feed;
    after = page.next_cursor;
  }
}

/**
 * `14.99` at scale 3 → `14.990`: an amount as DuckDB prints it from the files read together, whose money columns have
 * the largest scale among their currencies' (union_by_name widens every file's DECIMAL to it: no digit is lost).
 */
function atScale(amount: unknown, scale: number): string | null {
  if (amount === null || amount === undefined) return null;
  const [whole, fraction = ""] = String(amount).split(".");
  return scale === 0 ? whole! : `${whole}.${fraction.padEnd(scale, "0")}`;
}

/** The scale DuckDB reads the export's money at, all files together: `DECIMAL(22,4)` → 4. */
async function unionScale(prefix: string): Promise<number> {
  const [described] = await duckdb<{ column_type: string }>(prefix, "SELECT column_type FROM (DESCRIBE SELECT price FROM {files})");
  return Number(/^DECIMAL\(\d+,(\d+)\)$/.exec(described!.column_type)![1]);
}

/** Every column of the export as DuckDB reads it, in words the API's JSON can be compared with. */
function selectAll(columns: typeof CATALOGUE_COLUMNS, order: string): string {
  const select = columns.map(({ name, type }) => {
    if (type === "money") return `CAST("${name}" AS VARCHAR) AS "${name}"`;
    if (type === "timestamp") return `strftime("${name}", '%Y-%m-%dT%H:%M:%S.%gZ') AS "${name}"`;
    if (type === "int") return `CAST("${name}" AS INTEGER) AS "${name}"`;
    return `"${name}"`;
  });
  return `SELECT ${select.join(", ")}, CAST("date" AS VARCHAR) AS "date" FROM {files} ORDER BY ${order}`;
}

/** What DuckDB must return for a row the API serves: money as the files read together print it, every column present. */
function asDuckDb(columns: typeof CATALOGUE_COLUMNS, row: Row, date: string, scale: number): Row {
  return {
    ...Object.fromEntries(columns.map(({ name, type }) => [name, type === "money" ? atScale(row[name], scale) : (row[name] ?? null)])),
    date,
  };
}

/** A product of GET /products as one row per offer (one row of nulls for a product without offers). */
function offerRows(product: Row & { offers: Row[]; summary: Row }): Row[] {
  const fields: Row = {
    product_id: product.id,
    ...Object.fromEntries(
      ["sku", "gtin", "mpn", "name", "brand", "category", "image_url", "created_at", "updated_at", "last_changed_at"].map((k) => [
        k,
        product[k],
      ]),
    ),
    product_url: product.url,
    ...Object.fromEntries(Object.entries(product.summary).map(([k, v]) => [k === "currency" ? "summary_currency" : `summary_${k}`, v])),
  };
  if (product.offers.length === 0) return [fields];
  return product.offers.map((offer) => {
    const { url, unit_price, ...rest } = offer as Row & { unit_price: { amount: string; per: string } | null };
    return { ...fields, ...rest, offer_url: url, unit_price_amount: unit_price?.amount ?? null, unit_price_per: unit_price?.per ?? null };
  });
}

/** The shops, each selling in a currency of another scale: 2, 0, 3 and 4 decimals. */
const SHOPS = [
  { id: "cmp_lake_a", name: "Lake A", currency: "EUR" },
  { id: "cmp_lake_b", name: "Lake B", currency: "JPY" },
  { id: "cmp_lake_c", name: "Lake C ☕", currency: "KWD" },
  { id: "cmp_lake_d", name: "Lake D", currency: "CLF" },
] as const;

/** Products through the real ingestion: brands, categories, shipping known and unknown, unit prices, four currencies. */
async function ingestCatalogue(count: number, round: number) {
  await ingest(
    Array.from({ length: count }, (_, i) => {
      const { currency, ...shop } = SHOPS[i % SHOPS.length]!;
      const base = currency === "JPY" ? 1500 + i + round * 7 : 10 + i + round;
      return {
        sku: `LAKE-${i}`,
        name: `Lake product ${i} — “quoted”`,
        brand: i % 4 ? `Brand ${i % 5}` : null,
        category: i % 3 ? "Kettles" : null,
        competitor: shop,
        price: { EUR: `${base}.99`, JPY: String(base), KWD: `${base}.125`, CLF: `${base}.0625` }[currency],
        currency,
        shipping_cost: i % 2 ? (currency === "JPY" ? "500" : "4.95") : null,
        in_stock: (i + round) % 3 !== 0,
        ...(i % 5 === 0 ? { quantity: "500", unit: "g" } : {}),
        ...(i % 7 === 0 ? { seller: "Marketplace seller", condition: "refurbished" as const } : {}),
      };
    }),
  );
}

// Each test waits for an export's steps, one an alarm, and for retried uploads' backoff: more than the project's 20 s on a busy machine.
describe("DuckDB over the customer's bucket", { timeout: 90_000 }, () => {
  // First: its events' commits follow their timestamps, as in production (the other tests' ingestions commit events of now).
  it("reads a scheduled export over two hours with no gap and no duplicate at the partition boundary", async () => {
    connectLake();
    const hour = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
    const since = new Date(hour - 2 * HOUR_MS).toISOString();
    const earlier = await commitEvents((Date.now() - hour) / HOUR_MS + 0.5, 4); // in the hour before this one
    const created = await expectJson(
      await call("POST", "/exports", {
        token: account.token,
        body: { kind: "changes", format: "parquet", since, schedule: "hourly", destination: lakeDestination("hourly/") },
      }),
      202,
    );
    const first = await finished(created.id);
    expect(first.status).toBe("scheduled");
    const later = await commitEvents(0, 5); // this hour: the next span's
    await appendScheduledExports(database(env.DB), env.EXPORT_RUNNER, new WorkMeter(), Date.now() + HOUR_MS + 2 * 60_000);
    const second = await finished(created.id);
    expect(second.until).not.toBe(first.until);
    const read = await duckdb<{ event_id: string }>(second.prefix, "SELECT event_id FROM {files} ORDER BY event_id");
    const ids = read.map((row) => row.event_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining([...earlier, ...later]));
    const feed = await servedFeed(since, second.until!);
    expect(ids).toEqual(feed.map((e) => e.id).sort());
  });

  it("reads every offer and every field of the catalogue export, as GET /products serves the snapshot", async () => {
    connectLake();
    await ingestCatalogue(60, 0);
    await ingestCatalogue(40, 1); // a second round: previous prices, changes
    // A product sold in EUR and in JPY: its summary is in one of them, so one of its rows holds money of two scales.
    await ingest(
      [SHOPS[0], SHOPS[1]].map(({ currency, ...shop }) => ({
        sku: "LAKE-TWO-CURRENCIES",
        name: "Sold in two currencies",
        competitor: shop,
        price: currency === "JPY" ? "2400" : "15.49",
        currency,
        in_stock: true,
      })),
    );
    await publishSnapshot();
    const created = await expectJson(
      await call("POST", "/exports", {
        token: account.token,
        body: { kind: "catalogue", format: "parquet", destination: lakeDestination("catalogue/") },
      }),
      202,
    );
    const detail = await finished(created.id);
    expect(detail.status).toBe("succeeded");
    expect(detail.prefix).toBe(`catalogue/${created.id}/`);

    const served = await utf8Text(await call("GET", "/products", { token: account.key, headers: { Accept: "application/x-ndjson" } }));
    const offers = served
      .split("\n")
      .filter(Boolean)
      .flatMap((line) => offerRows(JSON.parse(line)));
    const date = detail.file_list[0]!.path.slice("date=".length, "date=YYYY-MM-DD".length);

    // Each file holds one currency, its money at that currency's scale: read alone, DuckDB returns the API's own
    // amounts, digit for digit (JPY 1500, EUR 10.99, KWD 10.125, CLF 10.0625).
    const servedOffer = new Map(offers.map((offer) => [`${offer.product_id}/${offer.competitor_id}`, offer]));
    const seen = new Map<string, string>();
    const fileOf = new Map<string, string>();
    const summaryTypes = new Set<string>();
    for (const file of detail.file_list) {
      const read = await duckdb<Row & { product_id: string; competitor_id: string; currency: string; type: string; summary_type: string }>(
        detail.prefix,
        `SELECT product_id, competitor_id, currency, typeof(price) AS type, typeof(summary_min_price) AS summary_type, ${[
          "price",
          "shipping_cost",
          "total_price",
          "summary_min_price",
        ]
          .map((name) => `CAST("${name}" AS VARCHAR) AS "${name}"`)
          .join(", ")} FROM read_parquet('{root}${file.path}')`,
      );
      expect(new Set(read.map((row) => row.currency)).size).toBe(1);
      for (const { product_id, competitor_id, currency, type, summary_type, ...money } of read) {
        seen.set(currency, type);
        summaryTypes.add(`${type} ${summary_type}`);
        fileOf.set(currency, file.path);
        const offer = servedOffer.get(`${product_id}/${competitor_id}`)!;
        expect(money).toEqual({
          price: offer.price,
          shipping_cost: offer.shipping_cost,
          total_price: offer.total_price,
          summary_min_price: offer.summary_min_price,
        });
      }
    }
    expect(Object.fromEntries(seen)).toEqual({ EUR: "DECIMAL(18,2)", JPY: "DECIMAL(18,0)", KWD: "DECIMAL(18,3)", CLF: "DECIMAL(18,4)" });
    // The product in two currencies: the row whose offer is not in its summary's currency has each at its own scale.
    expect([...summaryTypes].filter((types) => new Set(types.split(" ")).size > 1)).toEqual([
      expect.stringMatching(/^DECIMAL\(18,0\) DECIMAL\(18,2\)$|^DECIMAL\(18,2\) DECIMAL\(18,0\)$/),
    ]);
    // Why the files are read by name (docs/exports.md, "Reading the files"): without it, DuckDB reads them all as the
    // first one's DECIMAL, and with a JPY file first every EUR amount loses its cents.
    const rounded = await duckdb<{ price: string }>(
      detail.prefix,
      `SELECT CAST(price AS VARCHAR) AS price FROM read_parquet(['{root}${fileOf.get("JPY")}', '{root}${fileOf.get("EUR")}']) WHERE currency = 'EUR'`,
    );
    expect(rounded.length).toBeGreaterThan(0);
    for (const { price } of rounded) expect(price).toMatch(/^\d+$/);

    // Read together (union_by_name), the files' money widens to the largest scale, CLF's 4: every amount still exact.
    const expected = offers
      .map((row) => asDuckDb(CATALOGUE_COLUMNS, row, date, 4))
      .sort((a, b) => (`${a.product_id}/${a.competitor_id}` < `${b.product_id}/${b.competitor_id}` ? -1 : 1));
    const read = await duckdb(detail.prefix, selectAll(CATALOGUE_COLUMNS, "product_id, competitor_id"));
    expect(read.length).toBe(expected.length);
    expect(read).toEqual(expected);
    // Typed columns, not text: money DECIMAL, timestamps TIMESTAMP, the day a DATE partition.
    const types = await duckdb<{ column_name: string; column_type: string }>(detail.prefix, "DESCRIBE SELECT * FROM {files}");
    const typeOf = Object.fromEntries(types.map((t) => [t.column_name, t.column_type]));
    expect(typeOf).toMatchObject({
      price: "DECIMAL(22,4)",
      checked_at: "TIMESTAMP",
      in_stock: "BOOLEAN",
      summary_offer_count: "BIGINT",
      date: "DATE",
    });
  });

  it("reads every change of a span reaching past 30 days (the archived history, then the feed), and an interrupted export resumes to the same rows", async () => {
    STEP_LIMITS.events = 4;
    STEP_LIMITS.historyProducts = 7;
    let outage = 2;
    const { uploads } = connectLake((url) =>
      url.includes("part-00003") && outage-- > 0 ? new Response("<Error><Code>SlowDown</Code></Error>", { status: 503 }) : undefined,
    );
    // Events of days ago first (their commit is as old as they are), moved to the archive as the cron does.
    await commitEvents(24 * 3, 5, { type: "stock.changed" });
    await commitEvents(24 * 2, 6);
    await archiveEvents(database(env.DB), env.ARCHIVE);
    await ingestCatalogue(30, 2);
    await ingestCatalogue(30, 3); // price and stock changes: the feed's events of today
    await publishSnapshot();
    // History older than the feed, for the same offers (what ingestion wrote then), moved to the archive.
    const { products } = await expectJson(await call("GET", "/products?sku=LAKE-3", { token: account.key }), 200);
    const ids = (await expectJson(await call("GET", "/products", { token: account.key }), 200)).products.map((p) => p.id);
    const ago = (days: number) => new Date(Date.now() - days * DAY_MS).toISOString();
    for (const [n, id] of ids.slice(0, 12).entries()) {
      const product = (await expectJson(await call("GET", `/products/${id}`, { token: account.key }), 200)) as {
        offers: { competitor_id: string; currency: string }[];
      };
      const offer = product.offers[0]!;
      const price = (minor: number) => ({ JPY: String(minor), KWD: `${minor}.250`, CLF: `${minor}.2525` })[offer.currency] ?? `${minor}.50`;
      await addHistory(id, [
        { competitor: offer.competitor_id, currency: offer.currency, price: price(100 + n), observedAt: ago(80) },
        { competitor: offer.competitor_id, currency: offer.currency, price: price(90 + n), observedAt: ago(55 - n) },
        { competitor: offer.competitor_id, currency: offer.currency, price: price(90 + n), inStock: false, observedAt: ago(40) },
        { competitor: offer.competitor_id, currency: offer.currency, price: price(95 + n), inStock: true, observedAt: ago(31) },
      ]);
    }
    expect(products).toHaveLength(1);
    await archiveHistory(database(env.DB), database(env.ALERTS_DB), env.ARCHIVE);

    const since = ago(60);
    const until = new Date().toISOString();
    const created = await expectJson(
      await call("POST", "/exports", {
        token: account.token,
        body: { kind: "changes", format: "parquet", since, until, destination: lakeDestination("changes/") },
      }),
      202,
    );
    const detail = await finished(created.id);
    expect(detail.status).toBe("succeeded");
    expect(uploads.filter((u) => u.includes("part-00003"))).toHaveLength(3); // failed twice, then written once
    const floor = ago(30);
    // USD (the feed's events), EUR, JPY, KWD and CLF files read together: money at CLF's scale, 4.
    const scale = await unionScale(detail.prefix);
    expect(scale).toBe(4);
    const unit = 10n ** BigInt(scale);
    const money = (amount: unknown) => atScale(amount, scale);

    // What the API serves: the feed's events of the span, and each product's history before the feed's floor.
    const feed = await servedFeed(since, until);
    const catalogue = new Map(
      ((await expectJson(await call("GET", "/products", { token: account.key }), 200)).products as Row[]).map((p) => [p.id, p]),
    );
    const fromFeed = (feed as (Row & { id: string; type: string; timestamp: string; data: Row })[]).map((event) => {
      const { data } = event;
      const product = catalogue.get(data.product_id);
      const price = event.type === "price.changed";
      const units = (amount: unknown) => BigInt(money(amount)!.replace(".", ""));
      const shipping = price && data.new_total_price != null ? units(data.new_total_price) - units(data.new_price) : null;
      return {
        event_id: event.id,
        type: event.type,
        timestamp: event.timestamp,
        observed_at: data.observed_at,
        product_id: data.product_id,
        sku: data.sku,
        name: data.name,
        brand: product?.brand ?? null,
        category: product?.category ?? null,
        competitor_id: data.competitor_id,
        competitor_name: data.competitor_name,
        url: data.url,
        currency: data.currency,
        old_price: price ? money(data.old_price) : null,
        new_price: price ? money(data.new_price) : null,
        change_abs: price ? money(data.change_abs) : null,
        change_pct: price ? data.change_pct : null,
        direction: price ? data.direction : null,
        shipping_cost: shipping === null ? null : `${shipping / unit}.${String(shipping % unit).padStart(scale, "0")}`,
        old_total_price: price ? money(data.old_total_price) : null,
        new_total_price: price ? money(data.new_total_price) : null,
        lowest_price_30d: price ? money(data.lowest_price_30d) : null,
        price: money(price ? data.new_price : data.price),
        in_stock_before: price ? null : data.in_stock_before,
        in_stock: price ? null : data.in_stock,
        source: "feed",
        date: event.timestamp.slice(0, 10),
      };
    });
    const fromHistory: Row[] = [];
    for (const id of ids.slice(0, 12)) {
      const { history } = (await expectJson(await call("GET", `/products/${id}/history`, { token: account.key }), 200)) as {
        history: { competitor_id: string; price: string; currency: string; in_stock: boolean; observed_at: string }[];
      };
      const product = catalogue.get(id)!;
      const last = new Map<string, (typeof history)[number]>();
      for (const entry of history) {
        const before = last.get(entry.competitor_id);
        last.set(entry.competitor_id, entry);
        if (!before || entry.observed_at < since || entry.observed_at >= floor) continue;
        const common = {
          type: "",
          timestamp: entry.observed_at,
          product_id: id,
          sku: product.sku,
          brand: product.brand,
          category: product.category,
          competitor_id: entry.competitor_id,
          currency: entry.currency,
          price: money(entry.price),
          date: entry.observed_at.slice(0, 10),
        };
        if (before.price !== entry.price)
          fromHistory.push({ ...common, type: "price.changed", old_price: money(before.price), new_price: money(entry.price) });
        if (before.in_stock !== entry.in_stock)
          fromHistory.push({ ...common, type: "stock.changed", in_stock_before: before.in_stock, in_stock: entry.in_stock });
      }
    }
    expect(fromHistory.length).toBe(12 * 4); // a price change, a stock change, then both at once

    const read = await duckdb(detail.prefix, selectAll(CHANGE_COLUMNS, "event_id"));
    const readFeed = read.filter((row) => row.source === "feed");
    const byId = (rows: Row[]) => [...rows].sort((a, b) => (String(a.event_id) < String(b.event_id) ? -1 : 1));
    expect(readFeed.length).toBe(fromFeed.length);
    expect(byId(readFeed)).toEqual(byId(fromFeed));
    const readHistory = read.filter((row) => row.source === "history");
    const key = (row: Row) => `${row.product_id}/${row.timestamp}/${row.type}`;
    const sortedBy = (rows: Row[]) => [...rows].sort((a, b) => (key(a) < key(b) ? -1 : 1));
    expect(sortedBy(readHistory)).toEqual(sortedBy(fromHistory).map((row) => expect.objectContaining(row)));
    expect(read.length).toBe(fromFeed.length + fromHistory.length);
    expect(new Set(read.map((row) => row.event_id)).size).toBe(read.length);
  });
});
