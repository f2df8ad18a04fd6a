import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { archiveHistory } from "../../src/catalogue/history-archive.ts";
import { archiveEvents } from "../../src/events/archive.ts";
import { appendScheduledExports } from "../../src/exports/service.ts";
import { STEP_LIMITS } from "../../src/exports/steps.ts";
import { database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { HOUR_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, expectJson, utf8Text } from "../helpers/http.ts";
import { testAccount } from "../helpers/sandbox.ts";

/**
 * Exports (src/exports/, docs/exports.md) through the real worker: its routes, its ExportRunner objects' alarms, D1,
 * R2 (EXPORTS) and the download URLs it signs. What the files hold is compared with what the API serves: GET /products
 * for a catalogue export, GET /events for a changes export. (Parquet is read by DuckDB in test/exports/lake.test.ts;
 * here the NDJSON form, whose rows are the same.) The customer's S3 bucket is beyond this machine: its requests are
 * answered by the test (https://s3.test), as webhook receivers are.
 */

type Row = Record<string, unknown>;
interface ExportDetail {
  id: string;
  status: string;
  rows: number;
  files: number;
  bytes: number;
  error: string | null;
  until: string | null;
  prefix: string;
  destination: Record<string, string> | null;
  manifest_url: string | null;
  file_list: { path: string; rows: number; bytes: number; download_url: string | null }[];
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

const start = (token: string, body: unknown) => call("POST", "/exports", { token, body });

/** The export once its steps have run (its object's alarms, one after another). */
async function finished(token: string, id: string, timeout = 30_000): Promise<ExportDetail> {
  let detail: ExportDetail | undefined;
  await vi.waitFor(
    async () => {
      detail = (await expectJson(await call("GET", `/exports/${id}`, { token }), 200)) as ExportDetail;
      expect(detail.status).not.toBe("running");
    },
    { timeout, interval: 100 },
  );
  return detail!;
}

/** A download URL fetched through the worker, as a client would. */
const download = (url: string) => call("GET", url.replace(/^https?:\/\/[^/]+/, ""));

async function ndjsonRows(detail: ExportDetail): Promise<Row[]> {
  const rows: Row[] = [];
  for (const file of detail.file_list) {
    const text = await utf8Text(await download(file.download_url!));
    rows.push(
      ...text
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Row),
    );
  }
  return rows;
}

/** A product of GET /products as one row per offer: what the catalogue export's rows must be, field for field. */
function offerRows(product: Row & { offers: Row[]; summary: Row }): Row[] {
  const fields = {
    product_id: product.id,
    ...Object.fromEntries(
      ["sku", "gtin", "mpn", "name", "brand", "category", "image_url", "created_at", "updated_at", "last_changed_at"].map((k) => [
        k,
        product[k],
      ]),
    ),
    product_url: product.url,
    // Every summary field but lowest_offer (an object; not an export column yet: the offers' rows hold its figures).
    ...Object.fromEntries(
      Object.entries(product.summary)
        .filter(([k]) => k !== "lowest_offer")
        .map(([k, v]) => [k === "currency" ? "summary_currency" : `summary_${k}`, v]),
    ),
  };
  return product.offers.map((offer) => {
    const { url, unit_price, ...rest } = offer as Row & { unit_price: { amount: string; per: string } | null };
    return { ...fields, ...rest, offer_url: url, unit_price_amount: unit_price?.amount ?? null, unit_price_per: unit_price?.per ?? null };
  });
}

/** The event ids of rows or events, sorted: a file set holds each day's rows in its own files, so only the set is compared (and no id twice). */
const idsOf = (rows: Row[]) => {
  const ids = rows.map((row) => String(row.event_id ?? row.id)).sort();
  expect(new Set(ids).size, "an id twice").toBe(ids.length);
  return ids;
};

const byKey = (rows: Row[], ...keys: string[]) =>
  [...rows].sort((a, b) => {
    const ka = keys.map((k) => String(a[k])).join("\u0000");
    const kb = keys.map((k) => String(b[k])).join("\u0000");
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });

// First: its events are committed in time order (the later tests commit events of hours ago after newer ones, which
// production never does, and which would put them out of the feed's order from a `since`).
describe("a scheduled changes export", () => {
  it("appends each closed hour once: no gap and no duplicate at the boundary", async () => {
    const other = await freshAccount();
    const since = new Date(Math.floor(Date.now() / HOUR_MS) * HOUR_MS - 3 * HOUR_MS).toISOString();
    const before = await commitEvents(2.5, 3);
    const created = await expectJson(await start(other.token, { kind: "changes", format: "ndjson", since, schedule: "hourly" }), 202);
    const first = await finished(other.token, created.id);
    expect(first.status).toBe("scheduled");
    // Changes committed now fall after the first span's end (the last closed hour); the next hours close, and the cron
    // begins the next span from where the last one ended.
    const work = new WorkMeter();
    const after = await commitEvents(0, 4);
    const later = Date.now() + 2 * HOUR_MS;
    await appendScheduledExports(database(env.DB), env.EXPORT_RUNNER, work, later);
    const second = await finished(other.token, created.id);
    expect(second.status).toBe("scheduled");
    expect(Date.parse(second.until!)).toBeGreaterThan(Date.parse(first.until!));
    // Run again at the same time: nothing more to append.
    expect(await appendScheduledExports(database(env.DB), env.EXPORT_RUNNER, work, later)).toBe(0);
    const exported = await ndjsonRows(second);
    const served = await servedEvents(other.key, since, second.until!);
    expect(idsOf(exported)).toEqual(idsOf(served));
    expect(exported.map((row) => row.event_id)).toEqual(expect.arrayContaining([...before, ...after]));
    expect(new Set(exported.map((row) => row.event_id)).size).toBe(exported.length);
  });
});

describe("a catalogue export", () => {
  it("holds one row per offer of the published snapshot, every field as GET /products serves it, and a manifest", async () => {
    const [shopA, shopB] = [await createCompetitor(), await createCompetitor()];
    for (let i = 0; i < 25; i++) {
      await createProduct({
        id: `prd_${crypto.randomUUID().replaceAll("-", "")}`,
        brand: i % 3 ? `Brand ${i % 4}` : undefined,
        category: i % 2 ? "Kettles" : undefined,
        gtin: i % 5 ? String(4006381333931 + i) : undefined,
        offers: [
          {
            competitor: shopA.id,
            price: `${10 + i}.99`,
            shipping: i % 2 ? "4.95" : undefined,
            regularPrice: i % 4 ? `${20 + i}.00` : undefined,
          },
          ...(i % 3 ? [{ competitor: shopB.id, price: String(1000 + i), currency: i % 2 ? "JPY" : "KWD", inStock: i % 2 === 0 }] : []),
        ],
      });
    }
    await publishSnapshot();
    const created = await expectJson(await start(account.token, { kind: "catalogue", format: "ndjson" }), 202);
    expect(created.status).toBe("running");
    const detail = await finished(account.token, created.id);
    expect(detail).toMatchObject({ status: "succeeded", error: null, destination: null, prefix: `exports/${account.sub}/${created.id}/` });
    expect(detail.file_list.map((f) => f.path)).toEqual([expect.stringMatching(/^date=\d{4}-\d\d-\d\d\/part-00000\.ndjson$/)]);

    const served = await utf8Text(await call("GET", "/products", { token: account.key, headers: { Accept: "application/x-ndjson" } }));
    const expected = served
      .split("\n")
      .filter(Boolean)
      .flatMap((line) => offerRows(JSON.parse(line)));
    const exported = await ndjsonRows(detail);
    expect(byKey(exported, "product_id", "competitor_id")).toEqual(byKey(expected, "product_id", "competitor_id"));
    expect(detail.rows).toBe(expected.length);
    expect(detail.bytes).toBe(detail.file_list.reduce((sum, f) => sum + f.bytes, 0));

    const manifest = await expectJson<{ files: { path: string; rows: number }[]; rows: number; complete: boolean }>(
      await download(detail.manifest_url!),
      200,
    );
    expect(manifest).toMatchObject({ rows: expected.length, complete: true });
    expect(manifest.files.map((f) => f.path)).toEqual(detail.file_list.map((f) => f.path));
  });

  it("for the test environment holds the account's sandbox, as its test key's GET /products serves it", async () => {
    const sandbox = await testAccount();
    const created = await expectJson(await start(sandbox.token, { kind: "catalogue", format: "ndjson", environment: "test" }), 202);
    const detail = await finished(sandbox.token, created.id);
    expect(detail.status).toBe("succeeded");
    const served = await utf8Text(await call("GET", "/products", { token: sandbox.testKey, headers: { Accept: "application/x-ndjson" } }));
    const expected = served
      .split("\n")
      .filter(Boolean)
      .flatMap((line) => offerRows(JSON.parse(line)));
    const exported = await ndjsonRows(detail);
    expect(exported.length).toBe(expected.length);
    expect(exported.every((row) => String(row.sku).startsWith("TEST-"))).toBe(true);
    expect(byKey(exported, "product_id", "competitor_id")).toEqual(byKey(expected, "product_id", "competitor_id"));
  });
});

/** Every change event of [since, until) as GET /events pages them. */
async function servedEvents(key: string, since: string, until: string): Promise<Row[]> {
  const found: Row[] = [];
  let after: string | null = null;
  for (;;) {
    const query: string = after ? `after=${after}` : `since=${encodeURIComponent(since)}`;
    const page = (await expectJson(await call("GET", `/events?${query}&limit=1000`, { token: key }), 200)) as {
      events: Row[];
      next_cursor: string | null;
    };
    found.push(...page.events.filter((event) => String(event.timestamp) < until));
    if (page.events.length === 0 || !page.next_cursor) return found;
    after = page.next_cursor;
  }
}

describe("a changes export", () => {
  it("holds every price and stock change of the span, from D1 and the archive, in bounded steps, partitioned by day", async () => {
    STEP_LIMITS.events = 7; // many steps of a few events
    await commitEvents(24 * 5, 6);
    await commitEvents(24 * 3, 5, { type: "stock.changed" });
    await commitEvents(30, 4);
    await archiveEvents(database(env.DB), env.ARCHIVE); // the events older than a day leave D1 for R2
    await commitEvents(2, 5, { type: "stock.changed" });
    await commitEvents(1, 3);
    const since = new Date(Date.now() - 24 * 4 * HOUR_MS).toISOString();
    const until = new Date(Date.now() - 1.5 * HOUR_MS).toISOString();
    const created = await expectJson(await start(account.token, { kind: "changes", format: "ndjson", since, until }), 202);
    const detail = await finished(account.token, created.id);
    expect(detail.status).toBe("succeeded");

    const expected = await servedEvents(account.key, since, until);
    expect(expected).toHaveLength(5 + 4 + 5);
    const exported = await ndjsonRows(detail);
    expect(idsOf(exported)).toEqual(idsOf(expected));
    const servedById = new Map(expected.map((event) => [event.id, event as { id: string; type: string; timestamp: string; data: Row }]));
    for (const row of exported) {
      const event = servedById.get(String(row.event_id))!;
      expect(row).toMatchObject({
        type: event.type,
        timestamp: event.timestamp,
        sku: event.data.sku,
        competitor_id: event.data.competitor_id,
      });
      if (event.type === "price.changed") expect(row).toMatchObject({ old_price: event.data.old_price, new_price: event.data.new_price });
      else expect(row).toMatchObject({ price: event.data.price, in_stock: event.data.in_stock });
      expect(detail.file_list.some((f) => f.path.startsWith(`date=${event.timestamp.slice(0, 10)}/`))).toBe(true);
    }
    expect(detail.file_list.length).toBeGreaterThanOrEqual(2); // 14 events, 7 a step, each step a file per day
  });

  it("of the test environment holds only the account's sandbox changes", async () => {
    const sandbox = await testAccount();
    const { products } = await expectJson(await call("GET", "/products", { token: sandbox.testKey }), 200);
    const observations = products.slice(0, 3).map((product) => {
      const offer = product.offers[0]!;
      return {
        sku: product.sku,
        name: product.name,
        competitor: { id: offer.competitor_id, name: offer.competitor_name },
        price: offer.currency === "JPY" ? "123456" : "1234.56",
        currency: offer.currency,
        in_stock: offer.in_stock,
      };
    });
    await expectJson(await call("POST", "/test/observations", { token: sandbox.testKey, body: { observations } }), 200);
    await commitEvents(0.5, 2); // live events: never in a test export
    const since = new Date(Date.now() - HOUR_MS).toISOString();
    const created = await expectJson(await start(sandbox.token, { kind: "changes", format: "ndjson", environment: "test", since }), 202);
    const detail = await finished(sandbox.token, created.id);
    const exported = await ndjsonRows(detail);
    const served = await servedEvents(sandbox.testKey, since, "9");
    expect(idsOf(exported)).toEqual(idsOf(served));
    expect(exported.length).toBeGreaterThan(0);
    expect(exported.every((row) => String(row.sku).startsWith("TEST-"))).toBe(true);
  });
});

/** The changes a product's served history shows from `since` to `until`: each entry that differs from its offer's entry before. */
function historyChangesServed(
  history: { competitor_id: string; price: string; currency: string; in_stock: boolean; observed_at: string }[],
  since: string,
  until: string,
) {
  const last = new Map<string, (typeof history)[number]>();
  const changes: Row[] = [];
  for (const entry of history) {
    const before = last.get(entry.competitor_id);
    last.set(entry.competitor_id, entry);
    if (!before || entry.observed_at < since || entry.observed_at >= until) continue;
    if (before.price !== entry.price || before.currency !== entry.currency)
      changes.push({
        type: "price.changed",
        competitor_id: entry.competitor_id,
        timestamp: entry.observed_at,
        old_price: before.price,
        new_price: entry.price,
      });
    if (before.in_stock !== entry.in_stock)
      changes.push({
        type: "stock.changed",
        competitor_id: entry.competitor_id,
        timestamp: entry.observed_at,
        in_stock_before: before.in_stock,
        in_stock: entry.in_stock,
      });
  }
  return changes;
}

describe("a changes export past the feed's 30 days", () => {
  it("holds the archived history's changes before the feed's floor and the feed's events after it, no more and no fewer", async () => {
    STEP_LIMITS.historyProducts = 2; // several steps over the products' histories
    const shop = await createCompetitor();
    const day = 86_400_000;
    const ago = (days: number) => new Date(Date.now() - days * day).toISOString();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const product = await createProduct({
        id: `prd_${crypto.randomUUID().replaceAll("-", "")}`,
        brand: `Old ${i}`,
        category: "Archived",
        createdAt: "2025-03-01T00:00:00.000Z",
        offers: [{ competitor: shop.id, price: "20.00" }],
      });
      ids.push(product.id);
      await addHistory(product.id, [
        { competitor: shop.id, price: "25.00", observedAt: ago(70 + i) }, // before the span: the first change's old price
        { competitor: shop.id, price: "24.00", observedAt: ago(50) },
        { competitor: shop.id, price: "24.00", inStock: false, observedAt: ago(45) },
        { competitor: shop.id, price: "22.50", inStock: true, observedAt: ago(35 - i) },
        { competitor: shop.id, price: "20.00", observedAt: ago(3) }, // inside the feed's 30 days: the feed's, not the history's
      ]);
    }
    await archiveHistory(database(env.DB), database(env.ALERTS_DB), env.ARCHIVE); // rows older than a few days leave D1 for R2
    const stillInD1 = await env.DB.prepare("SELECT count(*) AS n FROM price_history WHERE observed_at < ?")
      .bind(ago(30))
      .first<{ n: number }>();
    expect(stillInD1!.n).toBe(0);
    await publishSnapshot();
    const feedIds = await commitEvents(24 * 2, 3);

    const since = ago(60);
    const until = new Date().toISOString();
    const created = await expectJson(
      await call("POST", "/exports", { token: account.token, body: { kind: "changes", format: "ndjson", since, until } }),
      202,
    );
    const detail = await finished(account.token, created.id);
    expect(detail.status).toBe("succeeded");
    const exported = await ndjsonRows(detail);
    const floor = ago(30);

    const fromHistory = exported.filter((row) => row.source === "history");
    const expectedHistory: Row[] = [];
    for (const id of ids) {
      const { history } = (await expectJson(await call("GET", `/products/${id}/history`, { token: account.key }), 200)) as {
        history: Parameters<typeof historyChangesServed>[0];
      };
      expectedHistory.push(
        ...historyChangesServed(history, since, floor).map((change) => ({
          ...change,
          product_id: id,
          brand: expect.stringMatching(/^Old /),
          category: "Archived",
        })),
      );
    }
    expect(expectedHistory.length).toBe(5 * 4); // 50 d: price; 45 d: stock; 35-31 d: price and stock
    expect(byKey(fromHistory, "product_id", "timestamp", "type")).toEqual(
      byKey(expectedHistory, "product_id", "timestamp", "type").map((row) => expect.objectContaining(row)),
    );
    expect(fromHistory.every((row) => String(row.timestamp) < floor && String(row.timestamp) >= since)).toBe(true);

    const fromFeed = exported.filter((row) => row.source === "feed");
    const served = await servedEvents(account.key, since, until);
    expect(idsOf(fromFeed)).toEqual(idsOf(served));
    expect(fromFeed.map((row) => row.event_id)).toEqual(expect.arrayContaining(feedIds));
  });
});

describe("the routes", () => {
  it.each([
    [{ kind: "everything" }, /kind: must be catalogue or changes/],
    [{ kind: "changes" }, /since: is required/],
    [{ kind: "catalogue", since: "2026-01-01" }, /Unrecognized key: "since"/],
    [{ kind: "changes", since: "2026-02-01", until: "2026-01-01" }, /until: must be later than since/],
    [{ kind: "changes", since: "yesterday" }, /since: must be an ISO-8601 date/],
    [{ kind: "catalogue", schedule: "hourly" }, /Unrecognized key: "schedule"/],
    [{ kind: "changes", since: "2026-01-01", until: "2026-02-01", schedule: "daily" }, /until: a scheduled export has no end/],
    [{ kind: "changes", since: "2026-01-01T00:30:00Z", until: "2026-01-01T05:00:00+05:00" }, /until: must be later than since/],
    [{ kind: "changes", since: "2026-01-01", schedule: "weekly" }, /schedule: must be hourly or daily/],
    [{ kind: "catalogue", format: "csv" }, /format: must be parquet or ndjson/],
    [{ kind: "catalogue", extra: 1 }, /extra/],
    [
      {
        kind: "catalogue",
        destination: {
          type: "s3",
          endpoint: "https://127.0.0.1:9000",
          bucket: "lake",
          region: "x",
          access_key_id: "a",
          secret_access_key: "b",
        },
      },
      /destination\.endpoint: .*loopback/,
    ],
    [
      {
        kind: "catalogue",
        destination: {
          type: "s3",
          endpoint: "http://s3.example.com",
          bucket: "lake",
          region: "x",
          access_key_id: "a",
          secret_access_key: "b",
        },
      },
      /destination\.endpoint: must be an https:\/\/ URL/,
    ],
    [
      {
        kind: "catalogue",
        destination: {
          type: "s3",
          endpoint: "https://s3.example.com",
          bucket: "Lake!",
          region: "x",
          access_key_id: "a",
          secret_access_key: "b",
        },
      },
      /destination\.bucket/,
    ],
    [
      {
        kind: "catalogue",
        destination: {
          type: "s3",
          endpoint: "https://s3.example.com",
          bucket: "lake",
          region: "x",
          access_key_id: "a b",
          secret_access_key: "b",
        },
      },
      /destination\.access_key_id: must be 1 to 128 printable ASCII characters, no spaces/,
    ],
    [
      {
        kind: "catalogue",
        destination: {
          type: "s3",
          endpoint: "https://s3.example.com",
          bucket: "lake",
          region: "eu west",
          access_key_id: "a",
          secret_access_key: "b",
        },
      },
      /destination\.region: must be 1 to 64 letters/,
    ],
  ])("refuses %j with a 400 naming the field", async (body, detail) => {
    const answer = await expectJson(await start(account.token, body), 400);
    expect(answer.detail).toMatch(detail);
  });

  it("shows another account's export as 404, and lists only the account's own", async () => {
    const [a, b] = [await freshAccount(), await freshAccount()];
    const created = await expectJson(await start(a.token, { kind: "catalogue" }), 202);
    await finished(a.token, created.id);
    expect((await expectJson(await call("GET", `/exports/${created.id}`, { token: b.token }), 404)).detail).toMatch(/No export/);
    expect((await expectJson(await call("GET", "/exports", { token: b.token }), 200)).exports).toEqual([]);
    expect((await expectJson(await call("GET", "/exports", { token: a.token }), 200)).exports.map((e: { id: string }) => e.id)).toEqual([
      created.id,
    ]);
    // A key is not a login: 401/403 before anything is read.
    expect((await call("GET", "/exports", { token: a.key })).status).toBe(403);
  });

  it("signs download URLs for an hour: a changed path, signature or expiry is 403", async () => {
    const created = await expectJson(await start(account.token, { kind: "catalogue" }), 202);
    const detail = await finished(account.token, created.id);
    const url = new URL(detail.manifest_url!);
    expect(Number(url.searchParams.get("expires")) - Date.now() / 1000).toBeGreaterThan(3590);
    expect((await download(url.href)).status).toBe(200);
    const tampered = (name: string, value: string) => {
      const copy = new URL(url);
      copy.searchParams.set(name, value);
      return download(copy.href);
    };
    expect((await tampered("path", "../../other/_manifest.json")).status).toBe(403);
    expect((await tampered("expires", String(Number(url.searchParams.get("expires")) + 10))).status).toBe(403);
    expect((await tampered("signature", "0".repeat(64))).status).toBe(403);
    expect((await tampered("signature", "nope")).status).toBe(400);
  });
});

describe("the customer's S3 bucket", () => {
  it("gets the files under its prefix, signed with SigV4; the secret is never shown; a failed upload is retried from the same step", async () => {
    STEP_LIMITS.events = 3;
    await commitEvents(6, 8);
    const realFetch = globalThis.fetch;
    const stored = new Map<string, Uint8Array>();
    let failures = 1;
    const puts: string[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      if (!request.url.startsWith("https://s3.test/")) return realFetch(input, init);
      expect(request.headers.get("authorization")).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDTEST\/\d{8}\/eu-west-1\/s3\/aws4_request/);
      const key = decodeURIComponent(new URL(request.url).pathname.slice("/lake/".length));
      puts.push(key);
      // The second part fails once (the bucket is down for a moment): the step runs again, from the same cursor.
      if (key.endsWith("part-00001.ndjson") && failures-- > 0) return new Response("SlowDown", { status: 503 });
      stored.set(key, new Uint8Array(await request.arrayBuffer()));
      return new Response(null, { status: 200 });
    });
    const since = new Date(Date.now() - 7 * HOUR_MS).toISOString();
    const until = new Date(Date.now() - 5 * HOUR_MS).toISOString();
    const destination = {
      type: "s3",
      endpoint: "https://s3.test",
      bucket: "lake",
      prefix: "prices/",
      region: "eu-west-1",
      access_key_id: "AKIDTEST",
      secret_access_key: "very-secret",
    };
    const answer = await start(account.token, { kind: "changes", format: "ndjson", since, until, destination });
    const created = await expectJson(answer, 202);
    expect(JSON.stringify(created)).not.toContain("very-secret");
    const detail = await finished(account.token, created.id, 55_000);
    expect(JSON.stringify(detail)).not.toContain("very-secret");
    expect(detail).toMatchObject({ status: "succeeded", prefix: `prices/${created.id}/`, manifest_url: null });
    expect(detail.file_list.every((f) => f.download_url === null)).toBe(true);
    expect(puts.filter((key) => key.endsWith("part-00001.ndjson"))).toHaveLength(2); // failed, then written once
    const files = [...stored.keys()].filter((key) => key.endsWith(".ndjson")).sort();
    expect(files).toEqual(detail.file_list.map((f) => `prices/${created.id}/${f.path}`).sort());
    const rows = files.flatMap((key) =>
      new TextDecoder()
        .decode(stored.get(key))
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Row),
    );
    const expected = await servedEvents(account.key, since, until);
    expect(idsOf(rows)).toEqual(idsOf(expected));
    expect(stored.has(`prices/${created.id}/_manifest.json`)).toBe(true);
  }, 60_000); // the failed step's retry waits 2 s, and its alarm may wait behind a busy machine
});
