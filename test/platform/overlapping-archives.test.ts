import { env } from "cloudflare:workers";
import { eq, inArray } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { archiveHistory, readHistoryYear } from "../../src/catalogue/history-archive.ts";
import { type ArchivedEvent, archiveEvents, archiveKey } from "../../src/events/archive.ts";
import { DELIVERIES_IN_D1_MS, DELIVERY_ARCHIVE_AFTER_MS, HISTORY_IN_D1_MS } from "../../src/events/retention.ts";
import { database } from "../../src/platform/db.ts";
import { getNdjsonGz } from "../../src/platform/ndjson-archive.ts";
import { eventArchive, events, priceHistory, webhookDeliveries } from "../../src/platform/tables.ts";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { archiveDeliveries, deliveryArchivePrefix } from "../../src/webhooks/delivery/delivery-archive.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct } from "../helpers/catalogue-factory.ts";
import { commitEvents } from "../helpers/events.ts";
import { createWebhook } from "../helpers/webhooks.ts";

/**
 * Cron runs can overlap (a slow run still going when the next minute's starts). Two runs of each archive started at
 * once, the second as the next minute's would be (its clock later, so more is due for it), then one more run after
 * both: every row is archived exactly once, and nothing has left D1 that is not in the archive.
 */

const db = () => database(env.DB);
const later = (ms: number) => Date.now() + ms;

/** Each id once: the duplicates among `ids`, if any. */
const duplicates = (ids: readonly (string | number)[]) => ids.filter((id, i) => ids.indexOf(id) !== i);

beforeAll(async () => {
  await createCompetitor({ id: "cmp_overlap", name: "Overlap" });
});

describe("overlapping cron runs", () => {
  it("archive every event exactly once", async () => {
    // 30 hours old (due for both runs), then 22 hours old (due only for the later one); 90 a call (D1's 100 parameters).
    const committed: string[] = [];
    for (const [hoursAgo, count] of [
      [30, 540],
      [22, 1080],
    ] as const)
      for (let i = 0; i < count; i += 90) committed.push(...(await commitEvents(hoursAgo, 90)));
    await Promise.allSettled([archiveEvents(db(), env.ARCHIVE), archiveEvents(db(), env.ARCHIVE, later(4 * HOUR_MS))]);
    await archiveEvents(db(), env.ARCHIVE, later(4 * HOUR_MS));

    const ranges = await db().select().from(eventArchive);
    const archived = (await Promise.all(ranges.map((range) => getNdjsonGz<ArchivedEvent>(env.ARCHIVE, archiveKey(range.firstSeq))))).flat();
    const archivedIds = archived.map((event) => event.id);
    expect(duplicates(archivedIds)).toEqual([]);
    const inD1 = (await db().select({ id: events.id }).from(events)).map((row) => row.id).filter((id) => committed.includes(id));
    expect(new Set([...archivedIds.filter((id) => committed.includes(id)), ...inD1])).toEqual(new Set(committed));
    expect(archivedIds.filter((id) => committed.includes(id))).toHaveLength(committed.length); // all of them were due
  });

  it("archive every webhook delivery exactly once", async () => {
    const { token } = await freshAccount();
    const webhook = await createWebhook(token, { url: "https://receiver.test/overlap" });
    const old = DELIVERY_ARCHIVE_AFTER_MS + 30 * MINUTE_MS;
    const rows = Array.from({ length: 400 }, (_, i) => ({
      eventId: `evt_${crypto.randomUUID().replaceAll("-", "")}`,
      webhookId: webhook.id,
      type: "price.changed",
      attempt: 1,
      statusCode: 200,
      error: null,
      durationMs: 5,
      outcome: "delivered" as const,
      // Up to 7 minutes ago: the last ones are past the 10 minutes D1 keeps only for the later run.
      deliveredAt: new Date(Date.now() - old + i * ((old - DELIVERIES_IN_D1_MS + 3 * MINUTE_MS) / 400)).toISOString(),
      responseExcerpt: `ok ${i}`,
    }));
    for (let i = 0; i < rows.length; i += 8)
      await db()
        .insert(webhookDeliveries)
        .values(rows.slice(i, i + 8));
    const stored = (
      await db().select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, webhook.id))
    ).map((row) => row.id);

    await Promise.allSettled([archiveDeliveries(db(), env.ARCHIVE), archiveDeliveries(db(), env.ARCHIVE, later(5 * MINUTE_MS))]);
    await archiveDeliveries(db(), env.ARCHIVE, later(5 * MINUTE_MS));

    const keys = (await env.ARCHIVE.list({ prefix: deliveryArchivePrefix(webhook.id) })).objects.map((object) => object.key);
    const archivedIds = (await Promise.all(keys.map((key) => getNdjsonGz<{ id: number }>(env.ARCHIVE, key)))).flat().map((row) => row.id);
    expect(duplicates(archivedIds)).toEqual([]);
    const inD1 = (
      await db().select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, webhook.id))
    ).map((row) => row.id);
    expect(new Set([...archivedIds, ...inD1])).toEqual(new Set(stored));
    expect(archivedIds.length + inD1.length).toBe(stored.length);
  });

  it("archive every price point exactly once", async () => {
    const productIds: string[] = [];
    const stored: number[] = [];
    /** Products with points from 40 days ago to today: the later run finds more of them past the two days D1 keeps. */
    const productsWithHistory = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const id = `prd_overlap_${productIds.length}`;
        productIds.push(id);
        await createProduct({ id, sku: `OVERLAP-${productIds.length}`, createdAt: "2024-06-01T00:00:00.000Z" });
        const days = [40, 30, 20, 12, 5, 3, 2.5, 2.2, 1.5, 0.5];
        await addHistory(
          id,
          days.map((ago, j) => ({
            competitor: "cmp_overlap",
            price: `${10 + j}.00`,
            observedAt: new Date(Date.now() - ago * DAY_MS).toISOString(),
          })),
        );
        stored.push(
          ...(await db().select({ id: priceHistory.id }).from(priceHistory).where(eq(priceHistory.productId, id))).map((row) => row.id),
        );
      }
    };
    const early = () => archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE);
    const late = () => archiveHistory(db(), database(env.ALERTS_DB), env.ARCHIVE, later(HISTORY_IN_D1_MS));
    // Started in both orders: which run writes an object last must not matter.
    await productsWithHistory(3);
    await Promise.allSettled([early(), late()]);
    await productsWithHistory(3);
    await Promise.allSettled([late(), early()]);
    await late();

    const years = [2023, 2024, 2025, 2026, 2027].map(String);
    const archivedIds = (await Promise.all(productIds.flatMap((id) => years.map((year) => readHistoryYear(env.ARCHIVE, id, year)))))
      .flat()
      .map((row) => row.id);
    expect(duplicates(archivedIds)).toEqual([]);
    const inD1 = (await db().select({ id: priceHistory.id }).from(priceHistory).where(inArray(priceHistory.productId, productIds))).map(
      (row) => row.id,
    );
    expect(new Set([...archivedIds, ...inD1])).toEqual(new Set(stored));
    expect(archivedIds.length + inD1.length).toBe(stored.length);
  });

  it("wait while a run that died holds its lease, and take the lease over once it has expired", async () => {
    const ids = await commitEvents(30, 10);
    const leftBy = (expiresAt: number) =>
      env.DB.prepare("INSERT OR REPLACE INTO cron_leases (task, holder, expires_at) VALUES ('events-archive', 'a run that died', ?)")
        .bind(expiresAt)
        .run();
    await leftBy(Date.now() + MINUTE_MS);
    expect(await archiveEvents(db(), env.ARCHIVE)).toBe(0);
    await leftBy(Date.now() - 1);
    expect(await archiveEvents(db(), env.ARCHIVE)).toBe(ids.length);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM cron_leases").first()).toEqual({ n: 0 }); // released
  });
});
