import { env } from "cloudflare:workers";
import { count, eq, inArray, sql } from "drizzle-orm";
import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_BODY_BYTES } from "../../src/app.ts";
import { MAX_OBSERVATIONS } from "../../src/observations/schema.ts";
import { database } from "../../src/platform/db.ts";
import { catalogueState, events, offers, priceHistory, products } from "../../src/platform/tables.ts";
import { D1_MAX_VALUE_BYTES, enforceD1Limits, isIngestionWrite } from "../helpers/d1.ts";
import { call, expectJson } from "../helpers/http.ts";
import { captureLogs } from "../helpers/logs.ts";
import { adminToken } from "../helpers/tokens.ts";
import { observation } from "../helpers/webhooks.ts";

/**
 * The largest legal ingestion: 1,000 observations with long unicode names and long URLs, as close to
 * the 1 MiB body limit as they fit, each changing both price and stock. Its events alone are over
 * 2,000,000 bytes of JSON; production D1 refuses a bound value that large (test/helpers/d1.ts makes the
 * local binding refuse it too, as local D1 does not).
 */

const db = () => database(env.DB);
const utf8 = new TextEncoder();
const T1 = "2026-06-01T10:00:00.000Z";
const T2 = "2026-06-01T11:00:00.000Z";
const T3 = "2026-06-01T12:00:00.000Z";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Long names: CJK (3 UTF-8 bytes a unit), emoji (4 bytes for 2 units), accents; and long ASCII URLs (percent-encoded, as RFC 3986 wants). */
const NAME = "東京の静かなヘッドホン Ünïcödé 🎧 ".repeat(20).slice(0, 190);
const url = (i: number) => `https://www.example.com/${"%E3%83%98%E3%83%83%E3%83%89".repeat(11)}/${crypto.randomUUID()}?ref=${i}`;

const bodyOf = (skus: readonly string[], at: string, price: string, inStock: boolean) => ({
  observations: skus.map((sku, i) => observation({ sku, name: NAME, url: url(i), observed_at: at, price, in_stock: inStock })),
});
const post = async (body: unknown) => call("POST", "/admin/observations", { token: await adminToken(), body: JSON.stringify(body) });

describe("the largest legal ingestion", () => {
  it("fits D1's limits: every bound value under 2,000,000 bytes and 100 parameters, and all 2,000 events are stored", async () => {
    const skus = Array.from({ length: MAX_OBSERVATIONS }, () => `MAX-${crypto.randomUUID()}`);
    const limits = enforceD1Limits();

    await expectJson(await post(bodyOf(skus, T1, "10.00", true)), 200);
    const eventCount = async () => (await db().select({ n: count() }).from(events))[0]!.n;
    const eventsBefore = await eventCount();
    const change = bodyOf(skus, T2, "12.50", false);
    const bytes = utf8.encode(JSON.stringify(change)).byteLength;
    expect(bytes).toBeGreaterThan(MAX_BODY_BYTES * 0.95);
    expect(bytes).toBeLessThanOrEqual(MAX_BODY_BYTES);
    expect(await expectJson(await post(change), 200)).toEqual({
      received: 1000,
      products_created: 0,
      offers_created: 0,
      price_changes: 1000,
      stock_changes: 1000,
    });

    const ids = db()
      .select({ id: products.id })
      .from(products)
      .where(sql`${products.sku} IN (SELECT value FROM json_each(${JSON.stringify(skus)}))`);
    expect(await eventCount()).toBe(eventsBefore + 2000);
    const [history] = await db().select({ n: count() }).from(priceHistory).where(inArray(priceHistory.productId, ids));
    expect(history!.n).toBe(2000);
    expect(limits().largestValueBytes).toBeLessThan(D1_MAX_VALUE_BYTES);
  });

  it("is all or nothing across the statements it is split into: a failure at the end of the batch leaves nothing", async () => {
    const skus = Array.from({ length: MAX_OBSERVATIONS }, () => `ALL-${crypto.randomUUID()}`);
    await expectJson(await post(bodyOf(skus, T1, "10.00", true)), 200);
    const [before] = await db().select().from(catalogueState);
    const [eventsBefore] = await db().select({ n: count() }).from(events);

    // The write batch gets one more statement at its end that fails (a negative price breaks a CHECK).
    const batch = env.DB.batch.bind(env.DB);
    let eventStatements = 0;
    vi.spyOn(env.DB, "batch").mockImplementation(async (statements) => {
      if (!isIngestionWrite(statements)) return batch(statements);
      eventStatements = statements.filter((s) =>
        (s as D1PreparedStatement & { statement: string }).statement.startsWith('INSERT INTO "events"'),
      ).length;
      const failing = env.DB.prepare(
        "INSERT INTO offers (product_id, competitor_id, price_minor, currency, in_stock) VALUES ('x', 'y', -1, 'USD', 1)",
      );
      return batch([...statements, failing]);
    });
    const logs = captureLogs();
    const res = await post(bodyOf(skus, T3, "12.50", false));
    expect(res.status).toBe(500);
    expect(logs).toEqual([expect.objectContaining({ level: "error", source: "http", path: "/admin/observations" })]);
    expect(eventStatements).toBeGreaterThan(1); // the events were split, and rolled back together

    expect(await db().select().from(catalogueState)).toEqual([before]);
    const [eventsAfter] = await db().select({ n: count() }).from(events);
    expect(eventsAfter!.n).toBe(eventsBefore!.n);
    const [one] = await db().select({ id: products.id }).from(products).where(eq(products.sku, skus[0]!));
    expect(
      await db()
        .select({ price: offers.priceMinor, inStock: offers.inStock, at: offers.checkedAt })
        .from(offers)
        .where(eq(offers.productId, one!.id)),
    ).toEqual([{ price: 1000, inStock: true, at: T1 }]);
  });
});
