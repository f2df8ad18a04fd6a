import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { database } from "../../src/platform/db.ts";
import { events } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";
import { ingest } from "../helpers/webhooks.ts";

/** GET /events: the catalogue's events, oldest first, paged by cursor. */

let key: string;
let since: string;
let code: string;

beforeAll(async () => {
  vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse); // the feed is the subject here, not the deliveries
  key = (await freshAccount({ plan: "premium" })).key;
  since = new Date().toISOString();
  code = `FEED-${Date.now()}`;
  // Four events: price up, stock out, price down, stock back.
  await ingest([{ sku: code, price: "10.00" }]);
  await ingest([{ sku: code, price: "11.00" }]);
  await ingest([{ sku: code, price: "11.00", in_stock: false }]);
  await ingest([{ sku: code, price: "9.00", in_stock: false }]);
  await ingest([{ sku: code, price: "9.00", in_stock: true }]);
});
afterAll(() => vi.restoreAllMocks());

/** GET /events with `query` ("" or from "?" on). */
const feed = async <Status extends number = 200>(query: string, status = 200 as Status) =>
  expectJson(await call("GET", `/events${query}` as `/events?${string}`, { token: key }), status);

describe("GET /events", () => {
  it("lists the events oldest first, as webhooks carry them plus id", async () => {
    const page = await feed(`?since=${since}`);
    expect(page.events.map((e) => [e.type, e.data.sku])).toEqual([
      ["price.changed", code],
      ["stock.changed", code],
      ["price.changed", code],
      ["stock.changed", code],
    ]);
    expect(page.next_cursor).toBeNull();
    const [first] = page.events;
    expect(Object.keys(first!).sort()).toEqual(["data", "id", "timestamp", "type"]);
    expect(first!.data).toMatchObject({ event_id: first!.id, old_price: "10.00", new_price: "11.00", direction: "up" });
  });

  it("pages with limit and next_cursor: every event once, in order", async () => {
    const all = (await feed(`?since=${since}`)).events.map((e) => e.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Schemas["EventFeed"] = await feed(`?since=${since}&limit=3${cursor ? `&after=${cursor}` : ""}`);
      seen.push(...page.events.map((e) => e.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all);
    const after = await feed(`?after=${all[1]}`);
    expect(after.events.map((e) => e.id).slice(0, 2)).toEqual(all.slice(2));
  });

  it("filters by type, one or several (the parameter repeated)", async () => {
    expect((await feed(`?since=${since}&type=stock.changed`)).events.map((e) => e.type)).toEqual(["stock.changed", "stock.changed"]);
    expect((await feed(`?since=${since}&type=stock.changed&type=price.changed`)).events).toHaveLength(4);
  });

  it("is rate-limited like every data route, and needs an API key", async () => {
    const first = rateLimitOf(await call("GET", "/events?limit=1", { token: key }));
    const second = rateLimitOf(await call("GET", "/events?limit=1", { token: key }));
    expect(second.remaining).toBe(first.remaining! - 1);
    expect((await call("GET", "/events")).status).toBe(401);
    const login = await accountToken("feed-account");
    const asProducts = (await call("GET", "/products", { token: login })).status;
    expect((await call("GET", "/events", { token: login })).status).toBe(asProducts); // an account login is refused as on /products
  });

  it.each([
    ["?limit=0", "limit"],
    ["?limit=1001", "limit"],
    ["?limit=ten", "limit"],
    ["?type=price.dropped", "type"],
    ["?since=yesterday", "since"],
    ["?after=123", "after"],
    ["?limit=1&limit=2", "limit"],
    ["?cursor=evt_x", '"cursor"'],
  ])("400 for %s, naming %s", async (query, field) => {
    const { detail } = await feed(query, 400);
    expect(detail).toContain(field);
  });

  it.each(["?type=price.dropped", "?type=stock.changed&type=price.dropped"])(
    "400 for %s lists the types, given once or repeated",
    async (query) => {
      // Not "expected array, received string": the detail says which values the parameter takes.
      expect((await feed(query, 400)).detail).toMatch(/^Invalid query: type(\.1)?: must be one of price\.changed, stock\.changed$/);
    },
  );

  it("410 for an after cursor older than 30 days, or unknown: start again with since", async () => {
    const [oldest] = (await feed(`?since=${since}&limit=1`)).events;
    await database(env.DB)
      .update(events)
      .set({ timestamp: new Date(Date.now() - 31 * 86_400_000).toISOString() })
      .where(eq(events.id, oldest!.id));
    for (const cursor of [oldest!.id, `evt_${"0".repeat(32)}`]) {
      const { detail } = await feed(`?after=${cursor}`, 410);
      expect(detail).toMatch(/30 days.*since/);
    }
    // Nor is the old event listed any more.
    expect((await feed(`?since=2000-01-01`)).events.map((e) => e.id)).not.toContain(oldest!.id);
  });
});

describe("where the feed is read", () => {
  it("a live feed page reads through a D1 session that a read replica may serve; the account's own events do not", async () => {
    const sessions = vi.spyOn(env.DB, "withSession");
    try {
      await expectJson(await call("GET", "/events", { token: key }), 200);
      expect(sessions.mock.calls).toEqual([["first-unconstrained"]]);
      sessions.mockClear();
      await expectJson(await call("GET", "/account/events", { token: await accountToken("feed-session") }), 200);
      expect(sessions).not.toHaveBeenCalled();
    } finally {
      sessions.mockRestore();
    }
  });
});
