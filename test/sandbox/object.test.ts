import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { SANDBOX_SHOPS } from "../../src/sandbox/world.ts";
import { call, expectJson } from "../helpers/http.ts";
import { sandboxOf, testAccount } from "../helpers/sandbox.ts";
import { createWebhook, ingest } from "../helpers/webhooks.ts";
import { invocationLog } from "../helpers/work-log.ts";

/**
 * Each account's sandbox in its own object (contract, fifth wave, "Test mode's own house"; src/sandbox/object.ts): its
 * changes write nothing to the shared D1, and no account's sandbox, however large, changes what a live read reads.
 */

describe("the sandbox's writes", () => {
  it("a POST /test/observations of 100 changes writes 0 D1 rows: its rows are its account's object's, and bounded", async () => {
    const { sub, testKey } = await testAccount();
    const { products } = await expectJson(await call("GET", "/products", { token: testKey }), 200);
    const observations = products.slice(0, 100).map((product) => {
      const offer = product.offers[0]!;
      return {
        sku: product.sku,
        name: "x",
        competitor: { id: offer.competitor_id, name: "x" },
        price: offer.price === "1.00" ? "2.00" : "1.00",
        currency: offer.currency,
        in_stock: !offer.in_stock,
      };
    });
    const log = invocationLog();
    const res = await call("POST", "/test/observations", { token: testKey, body: { observations } });
    expect(await expectJson(res, 200)).toMatchObject({ received: 100, price_changes: 100, stock_changes: 100 });
    const tally = await log.finalTally(res);
    expect(tally["d1-rows-written"]).toBe(0);
    // In its object: 100 products, 100 history rows and 200 events with their index entries (907 measured, the key's
    // object and the alarm included); nothing per row the account or others held before.
    expect(tally["do-rows-written"]).toBeGreaterThanOrEqual(400);
    expect(tally["do-rows-written"]).toBeLessThanOrEqual(1000);
    // And D1 holds none of it: the feed of its test key is its object's.
    const feed = await expectJson(await call("GET", "/events?limit=1000", { token: testKey }), 200);
    expect(feed.events).toHaveLength(200);
    const ids = JSON.stringify(feed.events.map((event) => event.id));
    const inD1 = await env.DB.prepare("SELECT count(*) AS n FROM events WHERE id IN (SELECT value FROM json_each(?))").bind(ids).first();
    expect(inD1).toEqual({ n: 0 });
    expect((await sandboxOf(sub).events({ limit: 1000 })).map((row) => row.id)).toEqual(feed.events.map((event) => event.id));
  });
});

describe("the object's refusals", () => {
  it("a failed check of an offer the sandbox does not have is 400 naming it, as for a live ingestion, and writes nothing", async () => {
    const { sub, testKey } = await testAccount();
    const { products } = await expectJson(await call("GET", "/products", { token: testKey }), 200);
    const product = products.find((p) => p.offers.length < SANDBOX_SHOPS.length)!;
    const missing = SANDBOX_SHOPS.find((shop) => !product.offers.some((offer) => offer.competitor_id === shop.id))!;
    const res = await call("POST", "/test/observations", {
      token: testKey,
      body: { observations: [{ sku: product.sku, name: "x", competitor: { id: missing.id, name: "x" }, check_status: "not_found" }] },
    });
    expect((await expectJson(res, 400)).detail).toMatch(/observations\.0\.check_status.*has no offer from/);
    expect(await sandboxOf(sub).overlay()).toEqual(new Map());
  });
});

describe("another account's sandbox", () => {
  it("20,000 sandbox events of B leave A's live feed page, live replay and own sandbox feed as they were (a live page read 20,025 D1 rows beside them in D1)", async () => {
    const b = await testAccount();
    const a = await testAccount();
    // A live webhook whose rule matches none of the events: its replay reads them all and sends nothing.
    const hook = await createWebhook(a.token, { url: "https://hooks.test/a-live", filters: { skus: ["OBJ-NONE"] } });
    await ingest(Array.from({ length: 30 }, (_, k) => ({ sku: `OBJ-LIVE-${k}`, price: `${10 + k}.00`, in_stock: true })));
    await ingest(Array.from({ length: 30 }, (_, k) => ({ sku: `OBJ-LIVE-${k}`, price: `${20 + k}.00`, in_stock: true })));
    const since = new Date(Date.now() - 60_000).toISOString();
    const tallied = async (res: Promise<Response>) => {
      const log = invocationLog();
      const answered = await res;
      const body = await answered.clone().json<{ events?: unknown[] }>();
      return { body, tally: await log.finalTally(answered) };
    };
    const reads = async () => ({
      livePage: await tallied(call("GET", `/events?limit=25&since=${encodeURIComponent(since)}`, { token: a.key })),
      replay: await tallied(call("POST", `/webhooks/${hook.id}/replay`, { token: a.token, body: { since } })),
      ownSandbox: await tallied(call("GET", "/events", { token: a.testKey })),
    });
    await reads(); // each key's object reads its key from D1 on its first request; the reads below are alike
    const before = await reads();
    expect(before.livePage.body.events).toHaveLength(25);
    // B's sandbox: 20,000 events in its own object, as its changes would have written them.
    const object = env.SANDBOX.get(env.SANDBOX.idFromName(b.sub));
    await runInDurableObject(object, (_, state) => {
      state.storage.sql.exec(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO events (id, type, timestamp, payload) SELECT printf('evt_%032x', i), 'price.changed', ?, '{"data":{}}' FROM n`,
        new Date().toISOString(),
      );
    });
    expect(await sandboxOf(b.sub).events({ limit: 20_001 })).toHaveLength(20_000);
    const after = await reads();
    // The same work, but for the key's object's rows: it writes a block of admissions when one is used up, not per request.
    const withoutKeyBlocks = ({ "do-rows-written": _, ...tally }: Record<string, number>) => tally;
    for (const read of ["livePage", "replay", "ownSandbox"] as const) {
      expect(after[read].body, read).toEqual(before[read].body);
      expect(withoutKeyBlocks(after[read].tally), read).toEqual(withoutKeyBlocks(before[read].tally));
    }
    expect(after.livePage.tally["other-do"]).toBe(0); // a live read calls no sandbox
  });
});
