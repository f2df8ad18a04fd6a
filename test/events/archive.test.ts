import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { asc, sql } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { archiveEvents, archiveKey, expireArchive } from "../../src/events/archive.ts";
import type { EventsQuery } from "../../src/events/query.ts";
import { EVENT_ARCHIVE_READS_PER_PAGE, EVENTS_IN_D1_MS, RETENTION_MS } from "../../src/events/retention.ts";
import { listEventsNewestFirst } from "../../src/events/service.ts";
import worker from "../../src/index.ts";
import { type Database, database } from "../../src/platform/db.ts";
import { eventIdTime, newEventId } from "../../src/platform/ids.ts";
import { eventArchive, events } from "../../src/platform/tables.ts";
import { HOUR_MS } from "../../src/platform/time.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { commitEvents } from "../helpers/events.ts";
import { call, expectJson } from "../helpers/http.ts";

/**
 * Events older than a day move from D1 to R2 (src/events/archive.ts); GET /events reads across the
 * boundary as if nothing moved: same order (commit order), same cursors, nothing missed or repeated.
 * Events are written straight into the outbox with chosen times; the archiver runs with an injected clock.
 */

const db = () => database(env.DB);
let key: string;

/** GET /events with `query` ("" or from "?" on). */
const feed = async <Status extends number = 200>(query: string, status = 200 as Status) =>
  expectJson(await call("GET", `/events${query}` as `/events?${string}`, { token: key }), status);

/** A page of the events newest first (MCP's recent_changes). */
const newestFirstPage = (query: Partial<EventsQuery>) => listEventsNewestFirst(db(), env.ARCHIVE, { type: undefined, ...query });

const commit = (hoursAgo: number, count: number, type: "price.changed" | "stock.changed" = "price.changed", fannedOut = true) =>
  commitEvents(hoursAgo, count, { type, fannedOut });

/** Every event of the feed for the query `first`, paged with `after`, `limit` a page. */
async function walk(first: string, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let page = await feed(`${first}${first ? "&" : "?"}limit=${limit}`);
  for (;;) {
    seen.push(...page.events.map((e) => e.id));
    if (!page.next_cursor) return seen;
    page = await feed(`${first}${first ? "&" : "?"}limit=${limit}&after=${page.next_cursor}`);
  }
}

async function clearEvents() {
  await db().delete(events);
  const ranges = await db().select().from(eventArchive);
  await env.ARCHIVE.delete(ranges.map((range) => archiveKey(range.firstSeq)));
  await db().delete(eventArchive);
}

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
});
afterEach(async () => {
  vi.restoreAllMocks();
  await clearEvents();
});

describe("the events archive", () => {
  it("moves what is older than a day, in commit order, and the feed reads across the boundary unchanged", async () => {
    // Three archive objects (the archiver runs after each group), then a day's worth left in D1.
    const old = [...(await commit(70, 5)), ...(await commit(60, 4, "stock.changed"))];
    await archiveEvents(db(), env.ARCHIVE);
    old.push(...(await commit(50, 6)));
    await archiveEvents(db(), env.ARCHIVE);
    old.push(...(await commit(30, 3, "stock.changed")));
    await archiveEvents(db(), env.ARCHIVE);
    const recent = [...(await commit(2, 4)), ...(await commit(1, 3, "stock.changed"))];
    expect(await archiveEvents(db(), env.ARCHIVE)).toBe(0); // nothing else is due
    const ranges = await db().select().from(eventArchive).orderBy(asc(eventArchive.firstSeq));
    expect(ranges.map((range) => range.count)).toEqual([9, 6, 3]);
    expect((await db().select({ id: events.id }).from(events)).map((row) => row.id).sort()).toEqual([...recent].sort());

    const all = [...old, ...recent];
    expect((await feed("?limit=1000")).events.map((e) => e.id)).toEqual(all);
    // Paged by after, across every object and into D1: every event once, in order.
    for (const limit of [1, 4, 7]) expect(await walk("", limit)).toEqual(all);
    // After an archived event, and after the last archived one.
    expect((await feed(`?after=${old[6]}&limit=5`)).events.map((e) => e.id)).toEqual(all.slice(7, 12));
    expect((await feed(`?after=${old.at(-1)}&limit=2`)).events.map((e) => e.id)).toEqual(recent.slice(0, 2));
    // since inside the archive, at the boundary, and in D1.
    const sinceOf = (hoursAgo: number) => `?since=${new Date(Date.now() - hoursAgo * HOUR_MS).toISOString()}`;
    expect(await walk(sinceOf(55), 4)).toEqual(all.slice(9));
    expect(await walk(sinceOf(24), 3)).toEqual(recent);
    expect(await walk(sinceOf(1.5), 2)).toEqual(recent.slice(4));
    // Types filter on both sides.
    const stock = (await feed("?type=stock.changed&limit=1000")).events.map((e) => e.id);
    expect(stock).toEqual([...old.slice(5, 9), ...old.slice(15), ...recent.slice(4)]);
    // The payload is the one stored: unicode and long names survive the round trip.
    expect((await feed(`?limit=1`)).events[0]!.data.name).toMatch(/^Café ☕ x{200} \d+$/);
  });

  it("newest first (MCP's recent_changes) reads the same events backwards across D1 and the archive, paged with after", async () => {
    const old = [...(await commit(70, 5)), ...(await commit(60, 4, "stock.changed"))];
    await archiveEvents(db(), env.ARCHIVE);
    old.push(...(await commit(50, 6)));
    await archiveEvents(db(), env.ARCHIVE);
    const recent = [...(await commit(2, 4)), ...(await commit(1, 3, "stock.changed"))];
    const all = [...old, ...recent];
    const since = (hoursAgo: number) => new Date(Date.now() - hoursAgo * HOUR_MS).toISOString();
    const newestFirst = async (query: Partial<EventsQuery>) => {
      const seen: string[] = [];
      let after: string | undefined;
      do {
        const page = await newestFirstPage({ ...query, ...(after && { after }) });
        seen.push(...page.events.map((event) => event.id));
        after = page.next_cursor ?? undefined;
      } while (after);
      return seen;
    };
    for (const limit of [1, 4, 100]) expect(await newestFirst({ limit })).toEqual(all.toReversed());
    expect((await newestFirstPage({ limit: 3 })).events.map((e) => e.id)).toEqual(recent.slice(-3).reverse());
    // After an archived event, and after the oldest event in D1.
    const afterOld = await newestFirstPage({ after: old[6], limit: 5 });
    expect(afterOld.events.map((e) => e.id)).toEqual(old.slice(1, 6).reverse());
    const afterRecent = await newestFirstPage({ after: recent[0], limit: 2 });
    expect(afterRecent.events.map((e) => e.id)).toEqual(old.slice(-2).reverse());
    // since (down to it, then no cursor) and types, on both sides.
    expect(await newestFirst({ since: since(55), limit: 4 })).toEqual(all.slice(9).reverse());
    expect(await newestFirst({ since: since(1.5), limit: 2 })).toEqual(recent.slice(4).reverse());
    expect(await newestFirst({ type: ["stock.changed"], limit: 2 })).toEqual([...old.slice(5, 9), ...recent.slice(4)].reverse());
  });

  it("a page whose filter matches nothing in the objects it may read ends early with a cursor, and nothing is skipped", async () => {
    for (let i = 0; i < EVENT_ARCHIVE_READS_PER_PAGE + 2; i++) {
      await commit(70 - i, 3);
      await archiveEvents(db(), env.ARCHIVE);
    }
    const stock = await commit(2, 2, "stock.changed");
    const first = await feed("?type=stock.changed");
    expect(first.events).toEqual([]);
    expect(first.next_cursor).not.toBeNull();
    expect(await walk("?type=stock.changed", 10)).toEqual(stock);
    // Newest first likewise: the stock events, then a page that stops at its archive budget with the cursor to go on from.
    const latest = await newestFirstPage({ type: ["stock.changed"], limit: 10 });
    expect(latest.events.map((e) => e.id)).toEqual(stock.toReversed());
    expect(latest.next_cursor).not.toBeNull();
    const rest = await newestFirstPage({ type: ["stock.changed"], limit: 10, after: latest.next_cursor! });
    expect(rest).toEqual({ events: [], next_cursor: null });
  });

  it("keeps events not yet fanned out in D1 for the outbox, and lists them once", async () => {
    const sent = await commit(40, 2);
    const unsent = await commit(39, 2, "price.changed", false);
    await archiveEvents(db(), env.ARCHIVE);
    expect((await db().select({ id: events.id }).from(events).orderBy(asc(events.seq))).map((row) => row.id)).toEqual(unsent);
    expect((await feed("?limit=100")).events.map((e) => e.id)).toEqual([...sent, ...unsent]);
    expect((await feed(`?after=${unsent[0]}`)).events.map((e) => e.id)).toEqual([unsent[1]]);
  });

  it("410 for an after older than 30 days, archived or not; the archive's expired objects are deleted", async () => {
    const expired = await commit(RETENTION_MS / HOUR_MS + 2, 2);
    const kept = await commit(RETENTION_MS / HOUR_MS - 2, 2);
    await archiveEvents(db(), env.ARCHIVE);
    for (const cursor of [expired[0]!, `evt_${"0".repeat(32)}`, newEventId(new Date(Date.now() - 40 * HOUR_MS).toISOString())]) {
      expect((await feed(`?after=${cursor}`, 410)).detail).toMatch(/30 days.*since/);
    }
    expect((await feed("?limit=10")).events.map((e) => e.id)).toEqual(kept);
    expect(await expireArchive(db(), env.ARCHIVE)).toBe(0); // one object holds both: it expires with its newest event
    const ranges = await db().select().from(eventArchive);
    expect(await expireArchive(db(), env.ARCHIVE, Date.parse(eventIdTime(kept[0]!)) + RETENTION_MS + 1)).toBe(1);
    expect(await env.ARCHIVE.head(archiveKey(ranges[0]!.firstSeq))).toBeNull();
    expect(await db().select().from(eventArchive)).toEqual([]);
  });
});

describe("a crash in the middle of archiving", () => {
  /** A client whose D1 batch fails: the archiver's record-and-delete step. */
  const failingBatch = (real: Database): Database =>
    new Proxy(real, {
      get: (target, property) =>
        property === "batch" ? () => Promise.reject(new Error("injected: D1 batch failed")) : Reflect.get(target, property, target),
    });

  const steps: [string, () => unknown, () => Database][] = [
    ["the R2 write", () => vi.spyOn(env.ARCHIVE, "put").mockRejectedValueOnce(new Error("injected: R2 put failed")), db],
    ["the D1 batch (after the R2 write)", () => undefined, () => failingBatch(db())],
  ];
  it.each(steps)("at %s loses and repeats nothing, and the next run finishes the move", async (_step, inject, client) => {
    const ids = [...(await commit(50, 4)), ...(await commit(3, 2))];
    const before = (await feed("?limit=100")).events.map((e) => e.id);
    expect(before).toEqual(ids);
    inject();
    await expect(archiveEvents(client(), env.ARCHIVE)).rejects.toThrow(/injected/);
    expect(await db().select().from(eventArchive)).toEqual([]);
    expect((await feed("?limit=100")).events.map((e) => e.id)).toEqual(ids);
    expect(await archiveEvents(db(), env.ARCHIVE)).toBe(4);
    expect((await feed("?limit=100")).events.map((e) => e.id)).toEqual(ids);
    expect(await walk("", 3)).toEqual(ids);
    expect((await db().select({ n: sql<number>`count(*)` }).from(events))[0]!.n).toBe(2);
  });
});

describe("the cron", () => {
  it("archives through the worker's scheduled handler", async () => {
    const old = await commit(EVENTS_IN_D1_MS / HOUR_MS + 1, 3);
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    expect((await db().select().from(eventArchive)).map((range) => range.count)).toEqual([3]);
    expect((await feed("?limit=10")).events.map((e) => e.id)).toEqual(old);
  });
});
