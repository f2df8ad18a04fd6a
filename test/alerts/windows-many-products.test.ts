import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { matchInEnvironments } from "../../src/alerts/environments.ts";
import { archiveHistory } from "../../src/catalogue/history-archive.ts";
import type { EventMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { DAY_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { factSources } from "../helpers/sandbox.ts";
import { openStream, readFrames } from "../helpers/stream-frames.ts";
import { hookUrl, installReceiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, storeEvents, testEvent } from "../helpers/webhooks.ts";

/**
 * Windows over 2 days read no archive object, whatever the number of products (issue 47, finding 4): a replay and a
 * stream's backfill of 500 products' changes with new_low_days: 30, their history archived to R2, read their offers'
 * days from D1 instead. They used to read each product's archived years: 1,000 R2 gets for 500 products.
 */

const PRODUCTS = 500;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
const productId = (i: number) => `prd_many_${String(i).padStart(4, "0")}`;
const d1 = () => database(env.DB).$client;
let messages: EventMessage[] = [];

beforeAll(async () => {
  installReceiver();
  vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
  const ids = Array.from({ length: PRODUCTS }, (_, i) => productId(i));
  // Each offer: 12.00 from 40 days ago (held when a 30-day window opens), 10.00 from 20 days ago; every even one was
  // 8.50 for a while 25 days ago, so its change to 9.00 below is no new 30-day low, an odd one's is.
  const history = ids.flatMap((id, i) => [
    [id, 1200, ago(40 * DAY_MS)],
    ...(i % 2 === 0 ? [[id, 850, ago(25 * DAY_MS)]] : []),
    [id, 1000, ago(20 * DAY_MS)],
  ]);
  await d1().batch([
    d1().prepare("INSERT INTO competitors (id, name, domain) VALUES ('cmp_many', 'Many', NULL)"),
    d1()
      .prepare(
        `INSERT INTO products (id, sku, name, created_at, updated_at)
         SELECT value, 'SKU-' || value, value, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z' FROM json_each(?)`,
      )
      .bind(JSON.stringify(ids)),
    d1()
      .prepare(
        `INSERT INTO price_history (product_id, competitor_id, price_minor, currency, in_stock, observed_at)
         SELECT value ->> 0, 'cmp_many', value ->> 1, 'USD', 1, value ->> 2 FROM json_each(?)`,
      )
      .bind(JSON.stringify(history)),
  ]);
  while ((await archiveHistory(database(env.DB), database(env.ALERTS_DB), env.ARCHIVE)) > 0);
  const inD1 = await d1().prepare("SELECT count(*) AS n FROM price_history WHERE product_id LIKE 'prd_many_%'").first<{ n: number }>();
  expect(inD1!.n).toBe(0); // all of it is in R2 now
  messages = ids.map((id, i) => ({
    kind: "event",
    event: testEvent("price.changed", {
      product_id: id,
      sku: `SKU-${id}`,
      competitor_id: "cmp_many",
      currency: "USD",
      old_price: "10.00",
      new_price: "9.00",
      observed_at: ago((PRODUCTS - i) * MINUTE_MS),
    }),
    price_change: { old_minor: 1000, new_minor: 900 },
  }));
  for (let i = 0; i < messages.length; i += 10) await storeEvents(messages.slice(i, i + 10));
});
afterAll(() => vi.restoreAllMocks());

/** The archive's reads (get and head) while `run` runs, by key. */
async function archiveReads(run: () => Promise<void>): Promise<string[]> {
  const get = vi.spyOn(env.ARCHIVE, "get");
  const head = vi.spyOn(env.ARCHIVE, "head");
  try {
    await run();
    return [...get.mock.calls, ...head.mock.calls].map(([key]) => key);
  } finally {
    get.mockRestore();
    head.mockRestore();
  }
}

const oddProducts = Array.from({ length: PRODUCTS / 2 }, (_, i) => productId(2 * i + 1));

describe("windows over 2 days, over many products", () => {
  it("a replay with new_low_days: 30 of 500 products' changes reads no archived history, and decides by it", async () => {
    const { token } = await freshAccount();
    const hook = await createWebhook(token, { url: hookUrl("many-windows"), filters: { new_low_days: 30 } });
    let queued = 0;
    const reads = await archiveReads(async () => {
      ({ queued } = await expectJson(await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since: ago(DAY_MS) } }), 202));
    });
    expect(queued).toBe(PRODUCTS / 2); // the odd products: 9.00 is below 12.00 and 10.00; the even ones were 8.50
    expect(reads.filter((key) => key.startsWith("history/"))).toEqual([]);
    expect(reads.length).toBeLessThanOrEqual(2);
  });

  it("a stream's backfill with new_low_days: 30 over 500 products reads no archived history, and sends the new lows", async () => {
    const { token } = await freshAccount();
    const { key } = await addKey(token);
    let sent: string[] = [];
    const reads = await archiveReads(async () => {
      const stream = readFrames(await openStream(key, `?since=${encodeURIComponent(ago(DAY_MS))}&new_low_days=30`));
      try {
        await vi.waitFor(() => expect(stream.sentIds()).toHaveLength(PRODUCTS / 2), { timeout: 20_000, interval: 100 });
        sent = stream.frames.flatMap((frame) => /"product_id":"(prd_many_\d+)"/.exec(frame)?.[1] ?? []);
      } finally {
        await stream.close();
      }
    });
    expect(sent).toEqual(oddProducts);
    expect(reads.filter((key) => key.startsWith("history/"))).toEqual([]);
    expect(reads.length).toBeLessThanOrEqual(2);
  });

  it("reads in D1 what it returns (the 500 offers' days) and a few rows per offer, in one batch per database", async () => {
    const work = new WorkMeter();
    const matched = await matchInEnvironments(factSources(work.database(env.DB), work.alertsDatabase(env.ALERTS_DB)), messages, [
      { minChangeBp: 0, filters: { new_low_days: 30 }, accountId: "acc_many", environment: "live" },
    ]);
    expect(matched).toHaveLength(PRODUCTS / 2);
    const days = await env.ALERTS_DB.prepare("SELECT count(*) AS n FROM offer_price_days WHERE product_id LIKE 'prd_many_%'").first<{
      n: number;
    }>();
    console.log(`500 offers' windows: ${work.d1} round trip(s), ${work.d1RowsRead} rows read, ${days!.n} days held`);
    // The history rows from the main database, then the days from the alert windows' own (src/alerts/windows.ts).
    expect(work.d1).toBe(2);
    // The second's time is counted apart too, for the scale model's time per database.
    expect(work.alertsD1Ms).toBeGreaterThan(0);
    expect(work.alertsD1Ms).toBeLessThan(work.d1Ms);
    // The days it returns, and a few rows per offer asked: its JSON entries and the seek of its last earlier day.
    expect(work.d1RowsRead).toBeLessThanOrEqual(3 * days!.n + 6 * PRODUCTS);
  });
});
