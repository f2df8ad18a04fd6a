import { env } from "cloudflare:workers";
import { eq, sql } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { archiveHistory, historyKey, readHistoryYear } from "../../src/catalogue/history-archive.ts";
import { HISTORY_ARCHIVE_AFTER_MS, HISTORY_IN_D1_MS } from "../../src/events/retention.ts";
import { type Database, database } from "../../src/platform/db.ts";
import { priceHistory } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";

/**
 * Price history older than a few days moves from D1 to R2, one object per product and year
 * (src/catalogue/history-archive.ts); GET /products/:id/history reads both as one history.
 */

const db = () => database(env.DB);
const DAY = 86_400_000;
const ago = (days: number) => new Date(Date.now() - days * DAY).toISOString();
let key: string;
let products = 0;

interface History {
  history: { competitor_id: string; price: string; observed_at: string }[];
}
const history = async (productId: string, query = "") =>
  expectJson<History>(await call("GET", `/products/${productId}/history${query}`, { token: key }), 200);

/**
 * A product (created 2024) whose history spans three calendar years, a back-filled row of 2019, and the last day
 * (before `now`: two products made with the same one have the same history).
 */
async function productWithYears(now = Date.now()) {
  const id = `prd_hist_${++products}_${"é".repeat(3)}`; // not only ASCII: the object key is encoded
  await createProduct({ id, sku: `HIST-${products}`, createdAt: "2024-06-01T00:00:00.000Z" });
  const rows = [
    ...["2019-05-01", "2024-07-01", "2024-12-31", "2025-03-01", "2025-09-15"].map((day, i) => ({
      competitor: i % 2 ? "cmp_b" : "cmp_a",
      price: `${10 + i}.99`,
      observedAt: `${day}T12:00:00.000Z`,
    })),
    ...[40, 20, 11, 0.5, 0.1].map((days, i) => ({
      competitor: i % 2 ? "cmp_b" : "cmp_a",
      price: `${20 + i}.50`,
      observedAt: new Date(now - days * DAY).toISOString(),
    })),
  ];
  await addHistory(id, rows);
  return id;
}

/** A product's rows in the alert windows' database (its id left out, to compare two products' alike). */
async function alertRows(productId: string) {
  const [days, fars] = await env.ALERTS_DB.batch<Record<string, unknown>>([
    env.ALERTS_DB.prepare(
      "SELECT competitor_id, day, currency, low_minor, high_minor, close_minor, closed_at FROM offer_price_days WHERE product_id = ? ORDER BY 1, 2, 3",
    ).bind(productId),
    env.ALERTS_DB.prepare(
      "SELECT competitor_id, through, extremes, close_minor, close_currency, closed_at FROM offer_price_far WHERE product_id = ? ORDER BY 1",
    ).bind(productId),
  ]);
  return { days: days!.results, fars: fars!.results };
}

const inD1 = async (productId: string) =>
  (await db().select({ observedAt: priceHistory.observedAt }).from(priceHistory).where(eq(priceHistory.productId, productId)))
    .map((row) => row.observedAt)
    .sort();

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_a", name: "A" });
  await createCompetitor({ id: "cmp_b", name: "B" });
});
afterEach(() => vi.restoreAllMocks());

describe("the history archive", () => {
  it("moves a product's old rows to its own objects, a year each, and the history reads the same", async () => {
    const id = await productWithYears();
    const other = await productWithYears();
    const queries = [
      "",
      "?from=2019-01-01T00:00:00Z&to=2020-01-01T00:00:00Z",
      "?from=1900-01-01T00:00:00Z",
      "?competitor=cmp_b",
      `?from=2024-12-01T00:00:00Z&to=${ago(15)}`,
      `?from=${ago(30)}`,
      "?to=2025-01-01T00:00:00Z",
    ];
    const before = await Promise.all(queries.map((query) => history(id, query)));
    expect(await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE)).toBe(2 * 8);
    // D1 keeps the last days; R2 has one object per product and year.
    expect(await inD1(id)).toHaveLength(2);
    expect((await inD1(id)).every((t) => t >= ago(HISTORY_IN_D1_MS / DAY))).toBe(true);
    // The year before its creation is its first object, and holds what was observed earlier still.
    expect((await readHistoryYear(env.ARCHIVE, id, "2023")).map((row) => row.observedAt)).toEqual(["2019-05-01T12:00:00.000Z"]);
    expect((await readHistoryYear(env.ARCHIVE, id, "2024")).map((row) => row.observedAt)).toEqual([
      "2024-07-01T12:00:00.000Z",
      "2024-12-31T12:00:00.000Z",
    ]);
    expect(await readHistoryYear(env.ARCHIVE, id, "2025")).toHaveLength(2);
    // Reading one product touches only its own objects.
    const get = vi.spyOn(env.ARCHIVE, "get");
    for (const [i, query] of queries.entries()) expect(await history(id, query)).toEqual(before[i]);
    expect(get.mock.calls.every(([objectKey]) => String(objectKey).startsWith(`history/${encodeURIComponent(id)}/`))).toBe(true);
    expect(get.mock.calls.length).toBeLessThanOrEqual(queries.length * 5); // never a year before the first object
    expect((await history(other)).history).toHaveLength(10);
    // Nothing more is due.
    expect(await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE)).toBe(0);
  });

  it("a product is due once its oldest row in D1 is HISTORY_ARCHIVE_AFTER_MS old; then all of its rows past the D1 window move", async () => {
    const HOUR = 3_600_000;
    const made = async (oldestAgo: number) => {
      const id = `prd_due_${++products}_${crypto.randomUUID().slice(0, 8)}`;
      await createProduct({ id, sku: `DUE-${products}` });
      await addHistory(id, [
        { competitor: "cmp_a", price: "10.00", observedAt: ago(oldestAgo / DAY) },
        { competitor: "cmp_b", price: "11.00", observedAt: ago((HISTORY_IN_D1_MS + HOUR) / DAY) },
        { competitor: "cmp_a", price: "9.50", observedAt: ago(0.1) },
      ]);
      return { id, before: await history(id) };
    };
    const waiting = await made(HISTORY_ARCHIVE_AFTER_MS - HOUR);
    const due = await made(HISTORY_ARCHIVE_AFTER_MS + HOUR);
    await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    // Not yet due: its rows past the D1 window wait, to be moved together with the next ones.
    expect(await inD1(waiting.id)).toHaveLength(3);
    // Due: both rows older than the D1 window left, the last one stays.
    const kept = await inD1(due.id);
    expect(kept).toHaveLength(1);
    expect(kept[0]! >= ago(HISTORY_IN_D1_MS / DAY)).toBe(true);
    for (const { id, before } of [waiting, due]) expect(await history(id)).toEqual(before);
  });

  it("a crash after some objects are written loses and repeats nothing; the next run finishes", async () => {
    const id = await productWithYears();
    const before = await history(id);
    const put = env.ARCHIVE.put.bind(env.ARCHIVE);
    let puts = 0;
    vi.spyOn(env.ARCHIVE, "put").mockImplementation(async (...args) => {
      if (++puts === 2) throw new Error("injected: R2 put failed");
      return put(...args);
    });
    await expect(archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE)).rejects.toThrow(/injected/);
    vi.restoreAllMocks();
    expect(await history(id)).toEqual(before);
    await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    expect(await history(id)).toEqual(before);
    expect(await inD1(id)).toHaveLength(2);
  });

  it("a crash after the objects and the days are written but before D1 forgets the rows: nothing lost, nothing counted twice", async () => {
    // The same history archived without a crash, for what its days and far rows must be.
    const now = Date.now();
    const control = await productWithYears(now);
    await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    const id = await productWithYears(now);
    const before = await history(id);
    // The delete from the main database fails: the days were written to the alert windows' own first.
    const client = db().$client;
    const failing = new Proxy(client, {
      get: (target, property) =>
        property === "prepare"
          ? (query: string) => {
              if (query.startsWith("DELETE FROM price_history")) throw new Error("injected: D1 delete failed");
              return target.prepare(query);
            }
          : Reflect.get(target, property, target),
    });
    const failingDelete = new Proxy(db(), {
      get: (target, property) => (property === "$client" ? failing : Reflect.get(target, property, target)),
    }) as Database;
    await expect(archiveHistory(failingDelete, database(env.ALERTS_DB), env.ARCHIVE)).rejects.toThrow(/injected/);
    expect(await inD1(id)).toHaveLength(10);
    const written = await alertRows(id);
    expect(written.days.length).toBeGreaterThan(0); // in both places now
    expect(await history(id)).toEqual(before);
    await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    // Folded again, harmlessly: the same days as the run without a crash, and the same far row once folded.
    expect(await alertRows(id)).toEqual(await alertRows(control));
    expect(await history(id)).toEqual(before);
    const ids = (await readHistoryYear(env.ARCHIVE, id, "2026")).map((row) => row.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toHaveLength(3);
    expect((await db().select({ n: sql<number>`count(*)` }).from(priceHistory).where(eq(priceHistory.productId, id)))[0]!.n).toBe(2);
    expect(historyKey(id, "2026")).toContain("%C3%A9");
  });

  it("folds old days by walking the day rows from a cursor: a bounded walk a run, every offer reached, then the start again", async () => {
    const alerts = env.ALERTS_DB;
    const count = async (sql: string) => (await alerts.prepare(sql).first<{ n: number }>())!.n;
    // 15,000 offers (random product ids, as newId makes them), each with 3 days past OFFER_DAYS_KEPT_MS and one recent:
    // 60,000 rows, more than one run walks (50,000), and 15,000 offers due, more than one run folds (2,000).
    const offers = 15_000;
    const today = Math.floor(Date.now() / DAY);
    await alerts
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?),
           -- MATERIALIZED: one random id an offer, shared by its four days (a CTE read twice would draw again).
           o(p) AS MATERIALIZED (SELECT 'prd_' || lower(hex(randomblob(16))) FROM n),
           d(day) AS (VALUES (?), (?), (?), (?))
         INSERT INTO offer_price_days (product_id, competitor_id, day, currency, low_minor, high_minor, close_minor, closed_at)
         SELECT p, 'cmp_walk', day, 'USD', 900, 1100, 1000, day * 86400000 + 43200000 FROM o, d`,
      )
      .bind(offers, today - 40, today - 39, today - 38, today - 1)
      .run();
    // This test's offers only (the tests before it left a few of their own).
    const folded = () => count("SELECT count(*) AS n FROM offer_price_far WHERE competitor_id = 'cmp_walk'");
    const oldDays = () => count(`SELECT count(*) AS n FROM offer_price_days WHERE competitor_id = 'cmp_walk' AND day < ${today - 30}`);
    let runs = 0;
    while ((await folded()) < offers) {
      await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
      runs++;
      // 2,000 offers a run, each folded once: its old days gone, its recent one kept.
      expect(await folded()).toBe(Math.min(offers, 2000 * runs));
      expect(await oldDays()).toBe(3 * (offers - (await folded())));
      expect(runs).toBeLessThanOrEqual(offers / 2000 + 1);
    }
    expect(await count("SELECT count(*) AS n FROM offer_price_days WHERE competitor_id = 'cmp_walk'")).toBe(offers);
    // The walk goes on past the last folded offer to the end, finds nothing due, and starts again from the first.
    await archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    expect(await alerts.prepare("SELECT product_id FROM offer_fold_cursor WHERE id = 1").first<string>("product_id")).toBe("");
    expect(await folded()).toBe(offers);
  });
});
