import { env } from "cloudflare:workers";
import { asc, eq, inArray } from "drizzle-orm";
import { afterEach, describe, expect, it, vi } from "vitest";
import { database } from "../../src/platform/db.ts";
import { catalogueState, offers, priceHistory, products } from "../../src/platform/tables.ts";
import { holdIngestionWrites } from "../helpers/d1.ts";
import { expectJson } from "../helpers/http.ts";
import { ingest, observation, postObservations } from "../helpers/webhooks.ts";

/**
 * Concurrent ingestions, with every one's read made to happen before any one's write (test/helpers/d1.ts
 * holds the write batches of the worker's own D1 binding until all reads have completed): the interleaving that
 * real D1's latency makes common, made certain.
 */

const db = () => database(env.DB);
const version = async () => (await db().select().from(catalogueState).get())?.version ?? 0;
const sku = (label: string) => `${label}-${crypto.randomUUID()}`;
const T1 = "2026-04-01T10:00:00.000Z";
const at = (minute: number) => `2026-04-01T11:${String(minute).padStart(2, "0")}:00.000Z`;

afterEach(() => {
  vi.restoreAllMocks();
});

describe("concurrent ingestions of disjoint products", () => {
  it("16 at once all answer 200 on their first write, and each marks its products with its own batch's version", async () => {
    // Two stored products each, changed at once, plus one new product each.
    const skus = Array.from({ length: 16 }, () => [sku("DISJ-A"), sku("DISJ-B"), sku("DISJ-NEW")] as const);
    await ingest(
      skus.flatMap(([a, b]) => [
        { sku: a, observed_at: T1 },
        { sku: b, observed_at: T1 },
      ]),
    );
    const before = await version();

    const batches = holdIngestionWrites(16);
    const responses = await Promise.all(
      skus.map(([a, b, created]) =>
        postObservations([
          observation({ sku: a, observed_at: at(1), price: "9.00" }),
          observation({ sku: b, observed_at: at(1), in_stock: false }),
          observation({ sku: created, observed_at: at(1) }),
        ]),
      ),
    );
    for (const res of responses) {
      expect(await expectJson(res, 200)).toEqual({
        received: 3,
        products_created: 1,
        offers_created: 1,
        price_changes: 1,
        stock_changes: 1,
      });
    }
    expect(batches()).toEqual({ reads: 16, writes: 16 }); // no write failed its guard, none was retried
    expect(await version()).toBe(before + 16);

    // Each call's three products carry the version its own batch moved to: 16 different marks, in commit
    // order, none at or below a version a build may already have covered.
    const marks = await db()
      .select({ sku: products.sku, changed: products.changedVersion })
      .from(products)
      .where(inArray(products.sku, skus.flat()));
    const byCall = skus.map((call) => new Set(call.map((s) => marks.find((m) => m.sku === s)!.changed)));
    for (const call of byCall) expect(call.size).toBe(1);
    expect(byCall.map((call) => [...call][0]!).sort((x, y) => x - y)).toEqual(Array.from({ length: 16 }, (_, i) => before + 1 + i));
  });
});

describe("concurrent ingestions of the same products", () => {
  it("stay correct: each change is applied once, against the state the one before left", async () => {
    const shared = sku("OVERLAP");
    await ingest([{ sku: shared, observed_at: T1, price: "10.00" }]);
    const own = Array.from({ length: 8 }, () => sku("OVERLAP-OWN"));

    const batches = holdIngestionWrites(8);
    const responses = await Promise.all(
      own.map((mine, i) =>
        postObservations([
          observation({ sku: shared, observed_at: at(i + 1), price: `${11 + i}.00` }),
          observation({ sku: mine, observed_at: at(i + 1) }),
        ]),
      ),
    );
    const results = await Promise.all(responses.map((res) => expectJson(res, 200)));
    expect(batches().writes).toBeGreaterThan(8); // the shared product made the writes conflict and retry

    // Whatever order they committed in, the offer ends at the latest observation and every history row
    // follows the one before it: no two calls computed a change from the same old price.
    const [row] = await db().select().from(products).where(eq(products.sku, shared));
    const [offer] = await db().select().from(offers).where(eq(offers.productId, row!.id));
    expect(offer).toMatchObject({ priceMinor: 1800, checkedAt: at(8) });
    const history = await db().select().from(priceHistory).where(eq(priceHistory.productId, row!.id)).orderBy(asc(priceHistory.id));
    const changes = results.reduce((sum, r) => sum + r.price_changes, 0);
    expect(history).toHaveLength(changes + 1);
    const observed = history.map((h) => h.observedAt);
    expect(observed).toEqual([...observed].sort());
    expect(results.reduce((sum, r) => sum + r.products_created, 0)).toBe(8);
  });

  it("two calls creating the same new sku make one product, never a 500: the loser re-reads and adds its offer to it", async () => {
    const created = sku("SAME-NEW");
    holdIngestionWrites(2);
    const responses = await Promise.all(
      ["cmp_first", "cmp_second"].map((id) =>
        postObservations([observation({ sku: created, observed_at: T1, competitor: { id, name: id } })]),
      ),
    );
    const results = await Promise.all(responses.map((res) => expectJson(res, 200)));
    expect(results.map((r) => r.products_created).sort()).toEqual([0, 1]);
    const rows = await db().select().from(products).where(eq(products.sku, created));
    expect(rows).toHaveLength(1);
    expect(await db().select().from(offers).where(eq(offers.productId, rows[0]!.id))).toHaveLength(2);
  });
});
