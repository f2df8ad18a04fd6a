import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { DeliveryMessage } from "../../src/events/messages.ts";
import { DELIVERIES_IN_D1_MS, DELIVERY_ARCHIVE_AFTER_MS, DELIVERY_LISTING_ARCHIVE_READS } from "../../src/events/retention.ts";
import worker from "../../src/index.ts";
import { type Database, database } from "../../src/platform/db.ts";
import { webhookDeliveries } from "../../src/platform/tables.ts";
import { MINUTE_MS } from "../../src/platform/time.ts";
import {
  archiveDeliveries,
  archivedAttempts,
  DELIVERY_ARCHIVE_CRON,
  deliveryArchivePrefix,
} from "../../src/webhooks/delivery/delivery-archive.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, expectJson } from "../helpers/http.ts";
import { costOf, statementsOf } from "../helpers/statements.ts";
import { hookUrl, installReceiver } from "../helpers/webhook-receiver.ts";
import { createWebhook } from "../helpers/webhooks.ts";

/**
 * Webhook delivery attempts leave D1 for R2 (src/webhooks/delivery/delivery-archive.ts): GET /webhooks/:id/deliveries
 * and replay's only_failed read both sides as if nothing moved, and a crash at any step of the archiver loses
 * and repeats nothing. Attempts are written straight into D1 with chosen times (oldest first, as ids grow).
 */

const db = () => database(env.DB);
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
const OLD = DELIVERY_ARCHIVE_AFTER_MS + 30 * MINUTE_MS;

beforeAll(() => {
  installReceiver();
});
// Each test from an empty log: a run takes the oldest attempt (by id) as the log's age, and an earlier test's recent
// attempts, recorded before this test's hand-dated old ones, would read as a log with nothing due.
beforeEach(async () => {
  await db().delete(webhookDeliveries);
});
afterEach(() => vi.restoreAllMocks());

type Outcome = "delivered" | "retrying" | "failed";
let n = 0;
/** Stores attempts to a webhook, one per (eventId, outcome, ms ago), in the order given. */
async function attempts(webhookId: string, made: readonly [eventId: string, outcome: Outcome, msAgo: number][]) {
  const rows = made.map(([eventId, outcome, msAgo]) => ({
    eventId,
    webhookId,
    type: "price.changed",
    attempt: 1,
    statusCode: outcome === "delivered" ? 200 : 503,
    error: outcome === "delivered" ? null : "The endpoint answered 503.",
    durationMs: 5,
    outcome,
    deliveredAt: ago(msAgo),
    responseExcerpt: `Réponse ✓ ${++n} ${"x".repeat(300)}`,
  }));
  // Eight rows a statement: D1 binds at most 100 parameters.
  for (let i = 0; i < rows.length; i += 8)
    await db()
      .insert(webhookDeliveries)
      .values(rows.slice(i, i + 8));
}

/** `count` attempts spread evenly from `fromAgo` to `toAgo` (ms ago), oldest first. */
const spread = (count: number, fromAgo: number, toAgo: number): [string, Outcome, number][] =>
  Array.from({ length: count }, (_, i) => [
    `evt_${crypto.randomUUID().replaceAll("-", "")}`,
    i % 3 === 0 ? "retrying" : "delivered",
    fromAgo - ((fromAgo - toAgo) * i) / count,
  ]);

const inD1 = async (webhookId: string) =>
  (await db().select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, webhookId))).length;
const listing = async (token: string, id: string) =>
  (await expectJson(await call("GET", `/webhooks/${id}/deliveries`, { token }), 200)).deliveries;
const archiveKeys = async (webhookId: string) =>
  (await env.ARCHIVE.list({ prefix: deliveryArchivePrefix(webhookId) })).objects.map((o) => o.key);

/** Every attempt of the webhook's archive from OLD ago on, as only_failed reads them. */
async function archivedOf(webhookId: string) {
  const rows = [];
  for await (const part of archivedAttempts(env.ARCHIVE, { webhookId, from: ago(OLD + MINUTE_MS), to: new Date().toISOString() }))
    rows.push(...part);
  return rows;
}

/** A Database whose deletes fail: the archiver dies between its R2 write and its D1 delete. */
function crashingOnDelete(real: Database): Database {
  return new Proxy(real, {
    get(target, property) {
      if (property === "delete") return () => ({ where: () => Promise.reject(new Error("injected: the isolate died before the delete")) });
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("the webhook delivery archive", () => {
  it("moves a webhook's attempts older than the D1 window once its oldest is due; the listing is the same before and after", async () => {
    const token = (await freshAccount()).token;
    const [busy, recent] = await Promise.all([createWebhook(token, { url: hookUrl() }), createWebhook(token, { url: hookUrl() })]);
    await attempts(busy.id, spread(120, OLD, DELIVERIES_IN_D1_MS + MINUTE_MS));
    await attempts(recent.id, spread(20, DELIVERY_ARCHIVE_AFTER_MS - 10 * MINUTE_MS, 0)); // its oldest is not due yet
    await attempts(busy.id, spread(30, DELIVERIES_IN_D1_MS - MINUTE_MS, 0));
    const before = await listing(token, busy.id);
    expect(before).toHaveLength(100);

    // The other cron does not touch deliveries; this one does.
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    expect(await inD1(busy.id)).toBe(150);
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: DELIVERY_ARCHIVE_CRON }), env);

    expect(await inD1(busy.id)).toBe(30); // the last minutes stay in D1
    expect(await inD1(recent.id)).toBe(20);
    expect(await archiveKeys(busy.id)).toHaveLength(1);
    expect(await archiveKeys(recent.id)).toEqual([]);
    expect(await listing(token, busy.id)).toEqual(before);
    const archived = await archivedOf(busy.id);
    expect(archived).toHaveLength(120);
    expect(archived[0]!.responseExcerpt).toMatch(/^Réponse ✓ /);
  });

  it("the listing fills its 100 from the newest archive objects, newest first, when D1 holds fewer", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    await attempts(hook.id, spread(60, 3 * OLD, 2 * OLD));
    await archiveDeliveries(db(), env.ARCHIVE, Date.now() - OLD); // an earlier run: one object
    await attempts(hook.id, spread(70, OLD, DELIVERIES_IN_D1_MS + MINUTE_MS));
    await attempts(hook.id, spread(5, MINUTE_MS, 0));
    const before = await listing(token, hook.id);
    await archiveDeliveries(db(), env.ARCHIVE);
    expect(await inD1(hook.id)).toBe(5);
    expect(await archiveKeys(hook.id)).toHaveLength(2);
    const after = await listing(token, hook.id);
    expect(after).toEqual(before);
    expect(after.map((d) => d.attempted_at)).toEqual([...after.map((d) => d.attempted_at)].sort().reverse());
  });

  it("a quiet webhook's listing reads up to DELIVERY_LISTING_ARCHIVE_READS objects of one attempt each, newest first", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    // An attempt now and then, each archived by a run of its own: one archive object per attempt, one more than the listing reads.
    const OBJECTS = DELIVERY_LISTING_ARCHIVE_READS + 1;
    for (let i = 0; i < OBJECTS; i++) {
      await attempts(hook.id, [[`evt_${crypto.randomUUID().replaceAll("-", "")}`, "delivered", OLD + (OBJECTS - i) * MINUTE_MS]]);
      await archiveDeliveries(db(), env.ARCHIVE);
    }
    expect(await inD1(hook.id)).toBe(0);
    expect(await archiveKeys(hook.id)).toHaveLength(OBJECTS);
    const get = vi.spyOn(env.ARCHIVE, "get");
    const listed = await listing(token, hook.id);
    expect(listed).toHaveLength(DELIVERY_LISTING_ARCHIVE_READS);
    expect(get).toHaveBeenCalledTimes(DELIVERY_LISTING_ARCHIVE_READS);
    expect(listed.map((d) => d.attempted_at)).toEqual([...listed.map((d) => d.attempted_at)].sort().reverse());
    // The newest attempts: the oldest one is the one left out.
    expect(listed.at(-1)!.attempted_at > ago(OLD + OBJECTS * MINUTE_MS)).toBe(true);
  });

  it("a run reads one row of the log while its oldest attempt is not due, and moves what is due once it is", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    await attempts(hook.id, spread(50, DELIVERY_ARCHIVE_AFTER_MS - MINUTE_MS, 0));
    const statements = await statementsOf(() => archiveDeliveries(db(), env.ARCHIVE));
    const reads = (await costOf(statements)).filter((cost) => /from "webhook_deliveries"/i.test(cost.sql));
    expect(reads.map((cost) => cost.rowsRead)).toEqual([1]);
    expect(await inD1(hook.id)).toBe(50);
    // Two minutes later its oldest attempts are due: the run reads the oldest rows and moves those past the D1 window.
    vi.spyOn(Date, "now").mockReturnValue(Date.now() + 2 * MINUTE_MS);
    await archiveDeliveries(db(), env.ARCHIVE);
    vi.restoreAllMocks();
    expect(await archiveKeys(hook.id)).toHaveLength(1);
  });

  it("a crash between the R2 write and the D1 delete, or a failed write, loses and repeats nothing", async () => {
    const token = (await freshAccount()).token;
    const [a, b] = await Promise.all([createWebhook(token, { url: hookUrl() }), createWebhook(token, { url: hookUrl() })]);
    await attempts(a.id, spread(40, OLD, DELIVERIES_IN_D1_MS + MINUTE_MS));
    await attempts(b.id, spread(40, OLD, DELIVERIES_IN_D1_MS + MINUTE_MS));
    const before = { a: await listing(token, a.id), b: await listing(token, b.id) };

    // 1. Written to R2, not deleted from D1: the rows are in both places; readers count them once.
    await expect(archiveDeliveries(crashingOnDelete(db()), env.ARCHIVE)).rejects.toThrow(/injected/);
    expect(await inD1(a.id)).toBe(40);
    expect(await archiveKeys(a.id)).toHaveLength(1);
    expect(await listing(token, a.id)).toEqual(before.a);

    // 2. One webhook's write fails: its rows stay in D1, the other's leave.
    const put = env.ARCHIVE.put.bind(env.ARCHIVE);
    vi.spyOn(env.ARCHIVE, "put").mockImplementation((key, value, options) =>
      key.startsWith(deliveryArchivePrefix(b.id)) ? Promise.reject(new Error("injected: R2 refused")) : put(key, value, options),
    );
    await expect(archiveDeliveries(db(), env.ARCHIVE)).rejects.toThrow(/R2 refused/);
    expect(await inD1(a.id)).toBe(0);
    expect(await inD1(b.id)).toBe(40);
    vi.restoreAllMocks();

    // 3. The next run finishes: every attempt exactly once, in R2 only.
    await archiveDeliveries(db(), env.ARCHIVE);
    expect(await inD1(b.id)).toBe(0);
    for (const [hook, listed] of [
      [a, before.a],
      [b, before.b],
    ] as const) {
      expect(await listing(token, hook.id)).toEqual(listed);
      const archived = await archivedOf(hook.id);
      expect(archived.map((row) => row.id)).toEqual([...new Set(archived.map((row) => row.id))]);
      expect(archived).toHaveLength(40);
    }
  });

  it("replay's only_failed judges an event by its attempts on both sides of the boundary, before and after the move", async () => {
    const token = (await freshAccount()).token;
    const [delivered, retriedThenFailed, failed, stillRetrying, never] = await commitEvents(2, 5);
    const hook = await createWebhook(token, { url: hookUrl(), events: ["price.changed"] });
    const early = DELIVERY_ARCHIVE_AFTER_MS + 5 * MINUTE_MS;
    await attempts(hook.id, [
      [delivered!, "delivered", early],
      [retriedThenFailed!, "retrying", early],
      [failed!, "failed", early],
      [stillRetrying!, "retrying", early],
      [retriedThenFailed!, "failed", MINUTE_MS], // its last attempt, still in D1
    ]);
    const since = ago(3 * 3_600_000);
    const onlyFailed = async () => {
      const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
      await expectJson(await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since, only_failed: true } }), 202);
      const ids = sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => (m.body as DeliveryMessage).event.id));
      sent.mockRestore();
      return ids;
    };
    const expected = [retriedThenFailed, failed, never];
    expect(await onlyFailed(), "before the move").toEqual(expected);
    await archiveDeliveries(db(), env.ARCHIVE);
    expect(await inD1(hook.id)).toBe(1);
    expect(await onlyFailed(), "after the move").toEqual(expected);
  });

  it("replay's only_failed holds one archive object at a time, however many its span has", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl(), events: ["price.changed"] });
    const OBJECTS = 12;
    const events = await commitEvents(3, OBJECTS + 1);
    // Each event delivered once, archived by a run of its own: one archive object per event; the last never attempted.
    for (const [i, eventId] of events.slice(0, OBJECTS).entries()) {
      await attempts(hook.id, [[eventId, "delivered", OLD - i * MINUTE_MS]]);
      await archiveDeliveries(db(), env.ARCHIVE);
    }
    expect(await archiveKeys(hook.id)).toHaveLength(OBJECTS);

    // Objects being read (asked for, body not yet read through), at most at once.
    let reading = 0;
    let most = 0;
    const get = env.ARCHIVE.get.bind(env.ARCHIVE);
    vi.spyOn(env.ARCHIVE, "get").mockImplementation((async (key: string, options?: R2GetOptions) => {
      if (!key.startsWith(deliveryArchivePrefix(hook.id))) return get(key, options);
      most = Math.max(most, ++reading);
      await new Promise((resolve) => setTimeout(resolve, 5)); // a read takes time: concurrent ones would overlap
      const object = await get(key, options);
      if (!object) return object;
      const body = await object.arrayBuffer();
      reading--;
      return Object.assign(object, { arrayBuffer: async () => body });
    }) as R2Bucket["get"]);
    const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    const since = ago(4 * 3_600_000);
    expect(
      await expectJson(await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since, only_failed: true } }), 202),
    ).toMatchObject({ queued: 1, held_back: 0 });
    expect(sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => (m.body as DeliveryMessage).event.id))).toEqual([events.at(-1)]);
    expect(most).toBe(1);
  });
});
