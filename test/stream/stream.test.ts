import { runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { asc, like } from "drizzle-orm";
import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AlertFilters } from "../../src/alerts/schema.ts";
import { snapshotAccess } from "../../src/catalogue/snapshot/stub.ts";
import { liveData } from "../../src/key-data/live.ts";
import { database } from "../../src/platform/db.ts";
import { newEventId } from "../../src/platform/ids.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { ACCOUNT_EVENT_TYPES, events, WEBHOOK_EVENT_TYPES } from "../../src/platform/tables.ts";
import { MAX_STREAMS_PER_ACCOUNT, MAX_STREAMS_PER_KEY } from "../../src/stream/limits.ts";
import { BACKFILL_EXAMINED_MAX, eventFrames, type StreamTiming, subscribe } from "../../src/stream/service.ts";
import { hubOf } from "../../src/stream/stub.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf } from "../helpers/http.ts";
import { found, report } from "../helpers/secret-scanning.ts";
import { settled } from "../helpers/settle.ts";
import { recordingD1, type Statement } from "../helpers/statements.ts";
import { openStream, readFrames } from "../helpers/stream-frames.ts";
import { installReceiver } from "../helpers/webhook-receiver.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * GET /events/stream with a real SSE client (the `eventsource` package), whose fetch calls the worker.
 * The network between them is the test's: it can drop a connection mid-stream, and hold a reconnect
 * until the test has committed the events the client must not miss.
 */

const db = () => database(env.DB);
beforeAll(() => void installReceiver()); // no webhook is registered here; any delivery would be a stray request
afterAll(() => vi.restoreAllMocks());

let skus = 0;
const newSku = () => `STREAM-${Date.now()}-${++skus}-ü`;

async function eventIdsOf(sku: string): Promise<string[]> {
  const rows = await db()
    .select({ id: events.id })
    .from(events)
    .where(like(events.payload, `%${sku}%`))
    .orderBy(asc(events.seq))
    .all();
  return rows.map((row) => row.id);
}

/** A connection the test controls: every request the client makes, and a way to cut the current one. */
function network(key: string) {
  const requests: Request[] = [];
  let cut: (() => void) | undefined;
  let gate: Promise<void> = Promise.resolve();
  const fetch = async (url: string | URL | Request, init?: RequestInit) => {
    await gate;
    const request = new Request(url, init);
    request.headers.set("Authorization", `Bearer ${key}`);
    requests.push(request);
    const res = await exports.default.fetch(request);
    if (!res.body) return res;
    const reader = res.body.getReader();
    let dropped = false;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (dropped) return;
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
      start(controller) {
        cut = () => {
          dropped = true;
          controller.error(new Error("connection dropped by the test"));
          void reader.cancel();
        };
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return {
    fetch,
    requests,
    drop: () => cut?.(),
    holdReconnects: () => {
      let open!: () => void;
      gate = new Promise((resolve) => (open = resolve));
      return open;
    },
  };
}

describe("GET /events/stream", () => {
  it("backfills, goes live, and after a dropped connection resumes with Last-Event-ID, missing nothing and repeating nothing", async () => {
    const key = (await freshAccount({ plan: "premium" })).key;
    const [watched, other] = [newSku(), newSku()];
    await ingest([
      { sku: watched, price: "10.00" },
      { sku: other, price: "10.00" },
    ]);
    const since = new Date().toISOString(); // before this test's changes
    await ingest([{ sku: watched, price: "9.00" }]);
    await ingest([{ sku: other, price: "9.00" }]);
    await ingest([{ sku: watched, price: "8.00" }]);

    const net = network(key);
    const received: { id: string; type: string; data: { timestamp: string; data: { sku: string; new_price: string } } }[] = [];
    const query = new URLSearchParams([
      ["since", since],
      ["skus", watched],
      ["type", "price.changed"],
    ]);
    const source = new EventSource(`https://api.test/events/stream?${query}`, { fetch: net.fetch });
    source.addEventListener("price.changed", (message) => {
      received.push({ id: message.lastEventId, type: message.type, data: JSON.parse(message.data) });
    });
    try {
      await settled(() => expect(received).toHaveLength(2), 20); // the backfill
      await ingest([{ sku: watched, price: "7.00" }]);
      await settled(() => expect(received).toHaveLength(3), 20); // live

      const open = net.holdReconnects();
      net.drop();
      await ingest([{ sku: watched, price: "6.00" }]);
      await ingest([{ sku: other, price: "8.00" }]);
      await ingest([{ sku: watched, price: "5.00" }]);
      open();
      await settled(() => expect(received).toHaveLength(5), 20);

      const all = await eventIdsOf(watched);
      expect(received.map((event) => event.id)).toEqual(all);
      expect(received.map((event) => event.data.data.new_price)).toEqual(["9.00", "8.00", "7.00", "6.00", "5.00"]);
      expect(received.every((event) => event.type === "price.changed" && event.data.data.sku === watched)).toBe(true);
      // Each frame's data is the event exactly as GET /events gives it (contract), nothing more.
      const feed = await expectJson(
        await call("GET", `/events?type=price.changed&since=${received[0]!.data.timestamp}`, { token: key }),
        200,
      );
      for (const event of received) expect(event.data).toEqual(feed.events.find((listed) => listed.id === event.id));
      expect(net.requests).toHaveLength(2);
      expect(net.requests[1]!.headers.get("Last-Event-ID")).toBe(all[2]);
    } finally {
      source.close();
    }
  });

  it(`a key holds at most ${MAX_STREAMS_PER_KEY} streams: the next is 429 with a detail, counted like any request; closing one frees its slot`, async () => {
    const key = (await freshAccount({ plan: "premium" })).key;
    const open: Response[] = [];
    for (let i = 0; i < MAX_STREAMS_PER_KEY; i++) {
      const res = await call("GET", "/events/stream", { token: key, headers: { Accept: "text/event-stream" } });
      expect(res.status).toBe(200);
      expect(res.headers.get("Content-Type")).toBe("text/event-stream; charset=utf-8");
      open.push(res);
    }
    const refused = await call("GET", "/events/stream", { token: key });
    expect((await expectJson(refused, 429)).detail).toContain(`already has ${MAX_STREAMS_PER_KEY} event streams open`);
    expect(rateLimitOf(refused).remaining).toBe(rateLimitOf(open.at(-1)!).remaining! - 1);

    await open.pop()!.body!.cancel();
    await settled(async () => {
      const again = await call("GET", "/events/stream", { token: key });
      expect(again.status).toBe(200);
      open.push(again);
    }, 50);
    for (const res of open) await res.body!.cancel();
  });

  it("refuses what it cannot serve, before streaming", async () => {
    const key = (await freshAccount({ plan: "premium" })).key;
    expect(
      (await expectJson(await call("GET", "/events/stream", { token: key, headers: { "Last-Event-ID": `evt_${"0".repeat(32)}` } }), 410))
        .detail,
    ).toContain("older than 30 days or unknown");
    expect((await expectJson(await call("GET", "/events/stream?price_below=20", { token: key }), 400)).detail).toBe(
      "Invalid query: currency: is required with price_below (the currency the amounts are in)",
    );
    expect((await expectJson(await call("GET", "/events/stream?new_low_days=0", { token: key }), 400)).detail).toContain(
      "new_low_days: must be from 1 to 365",
    );
    expect((await expectJson(await call("GET", "/events/stream?direction=up&direction=down", { token: key }), 400)).detail).toContain(
      "direction",
    );
    expect(
      (await expectJson(await call("GET", "/events/stream", { token: key, headers: { "Last-Event-ID": "nope" } }), 400)).detail,
    ).toContain("last-event-id");
    expect((await call("GET", "/events/stream")).status).toBe(401);
    // None of those holds a slot.
    const streams = [];
    for (let i = 0; i < MAX_STREAMS_PER_KEY; i++) streams.push(await call("GET", "/events/stream", { token: key }));
    expect(streams.map((res) => res.status)).toEqual(Array(MAX_STREAMS_PER_KEY).fill(200));
    for (const res of streams) await res.body!.cancel();
  });
});

/**
 * A stream's frames as its worker makes them, from a real subscription to the account's hub, with shorter timings
 * than the route's: the heartbeats of many minutes in a few seconds. The worker's D1 statements go into `statements`
 * when given (its own alone, not the isolate's background work).
 */
async function framesOf(
  filters: AlertFilters,
  timing: StreamTiming,
  { account, statements }: { account?: { sub: string; keyId: string }; statements?: Statement[] } = {},
) {
  account ??= await freshAccount({ plan: "premium" });
  const rule = { types: WEBHOOK_EVENT_TYPES, minChangeBp: 0, filters };
  const socket = await subscribe(
    hubOf(env, account.sub),
    {
      keyId: account.keyId,
      keyHash: "unused: this key does not change",
      accountId: account.sub,
      request: { ip: "198.51.100.9", scope: undefined },
      rule,
    },
    new WorkMeter(),
  );
  const request = { after: undefined, since: undefined, rule };
  const db = database(statements ? recordingD1(statements) : env.DB);
  const work = new WorkMeter();
  return eventFrames(
    {
      db,
      // A live key's data, as the door hands it to the stream; nothing is done after an answer here.
      data: liveData({
        db,
        alerts: database(env.ALERTS_DB),
        replica: db,
        archive: env.ARCHIVE,
        catalogue: snapshotAccess(env, work),
        afterAnswer: () => {},
      }),
    },
    {
      request,
      key: { id: account.keyId, accountId: account.sub, environment: "live" },
      socket,
      timing,
      closed: new AbortController().signal,
    },
  );
}

describe("the stream's frames", () => {
  it("comment lines keep an idle stream open, and the server ends it after its lifetime, handing the present as its cursor", async () => {
    const frames = await framesOf({ skus: ["NONE"] }, { heartbeatMs: 10, lifetimeMs: 150 });
    const text: string[] = [];
    for await (const frame of frames) text.push(frame);
    expect(text[0]).toBe("retry: 1000\n: connected\n\n");
    expect(text).toContain(": keep-alive\n\n");
    expect(text.at(-1)).toContain("reconnect with Last-Event-ID");
    expect(text.at(-1)).toMatch(/\nid: evt_[0-9a-f]{32}\n\n$/);
    expect(text.some((frame) => frame.includes("data:"))).toBe(false);
  });

  it("an idle stream makes no D1 query: its heartbeats come from its worker, which reads nothing once connected", async () => {
    // 50 ms heartbeats for 3 s: 60 heartbeats, fifteen minutes' worth at the route's 15 s.
    const statements: Statement[] = [];
    const frames = await framesOf({ skus: ["NONE"] }, { heartbeatMs: 50, lifetimeMs: 60_000 }, { statements });
    expect((await frames.next()).value).toContain(": connected");
    statements.length = 0; // from here on: connected, and idle
    let heartbeats = 0;
    const until = Date.now() + 3_000;
    while (Date.now() < until) if ((await frames.next()).value === ": keep-alive\n\n") heartbeats++;
    await frames.return(undefined);
    expect(heartbeats).toBeGreaterThanOrEqual(40);
    expect(statements).toEqual([]);
  });
});

/** Rows generated inside D1 (a recursive CTE), so thousands cost one statement. */
const generate = (count: number, insert: string) =>
  env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count}) ${insert}`).run();

/** `count` stored price changes of `sku`, committed now: ids `evt_<tag><i>` (hex), in commit order. */
async function storePriceChanges(count: number, sku: string): Promise<void> {
  const tag = crypto.randomUUID().replaceAll("-", "").slice(0, 16);
  const at = new Date().toISOString();
  const data = `{"product_id":"prd_none","sku":"${sku}","competitor_id":"cmp_none","old_price":"2.00","new_price":"1.00","currency":"USD"}`;
  await generate(
    count,
    `INSERT INTO events (id, type, timestamp, payload, created_at, fanned_out_at) SELECT printf('evt_${tag}%016x', i), 'price.changed', '${at}', '{"type":"price.changed","timestamp":"${at}","data":${data}}', '${at}', '${at}' FROM n`,
  );
}

/** A stream read as it comes: its frames so far, and `ended`, which settles when the server ends it. */
describe("tenants apart: the stream", { timeout: 30_000 }, () => {
  it("never carries an account event, live or in the backfill, with or without type", async () => {
    const a = await freshAccount({ plan: "premium" });
    const b = await freshAccount({ plan: "premium" });
    const start = new Date().toISOString();
    const untyped = readFrames(await openStream(b.key, `?since=${new Date().toISOString()}`));
    const typed = readFrames(await openStream(b.key, `?type=price.changed&since=${new Date().toISOString()}`));
    try {
      await settled(() => expect(untyped.frames.join("\n")).toContain(": connected"));
      await settled(() => expect(typed.frames.join("\n")).toContain(": connected"));
      // A's account events, each kind: one through the worker (a leak report), the others as their writers store them.
      await expectJson(await report([found(a.key)]), 200);
      const at = new Date().toISOString();
      await db()
        .insert(events)
        .values(
          ACCOUNT_EVENT_TYPES.map((type) => ({
            id: `evt_${crypto.randomUUID().replaceAll("-", "")}`,
            type,
            timestamp: at,
            payload: JSON.stringify({ type, timestamp: at, data: { account_id: a.sub, key_id: a.keyId } }),
            accountId: a.sub,
          })),
        );
      const sku = newSku();
      await ingest([{ sku, price: "3.00" }]);
      await ingest([{ sku, price: "2.00" }]);
      const [change] = await eventIdsOf(sku);
      await settled(() => expect(untyped.sentIds()).toContain(change), 20);
      await settled(() => expect(typed.sentIds()).toContain(change), 20);
      const backfill = readFrames(await openStream(b.key, `?since=${start}`));
      await settled(() => expect(backfill.sentIds()).toContain(change), 20);
      await backfill.close();
      for (const stream of [untyped, typed, backfill]) {
        const text = stream.frames.join("\n\n");
        expect(text).not.toContain(a.sub);
        expect(text).not.toContain(a.keyId);
        for (const type of ACCOUNT_EVENT_TYPES) expect(text).not.toContain(`event: ${type}`);
      }
    } finally {
      await untyped.close();
      await typed.close();
    }
  });

  it("a stream that sent nothing ends with a catalogue event as its cursor, never another account's newer events; GET /events refuses those as unknown", async () => {
    const [a, b] = [await freshAccount({ plan: "premium" }), await freshAccount({ plan: "premium" })];
    const sku = newSku();
    await ingest([{ sku, price: "3.00" }]);
    await ingest([{ sku, price: "2.00" }]);
    const [catalogueNewest] = await eventIdsOf(sku);
    // B's events, newer than any catalogue event: an account event (live) and a sandbox change (test).
    const at = new Date(Date.now() + 1000).toISOString();
    const own = [
      { type: "api_key.leaked", environment: "live" as const, data: { account_id: b.sub, key_id: b.keyId } },
      { type: "price.changed", environment: "test" as const, data: { sku: "TEST-VC-0001" } },
    ].map(({ type, environment, data }) => ({
      id: newEventId(at),
      type,
      timestamp: at,
      payload: JSON.stringify({ type, timestamp: at, data }),
      accountId: b.sub,
      environment,
    }));
    await db().insert(events).values(own);
    // And 2,000 more of B's account events: finding the present must not read them.
    const tag = crypto.randomUUID().replaceAll("-", "").slice(0, 16);
    await generate(
      2_000,
      `INSERT INTO events (id, type, timestamp, payload, account_id) SELECT printf('evt_${tag}%016x', i), 'usage.threshold', '${at}', '{}', '${b.sub}' FROM n`,
    );

    const statements: Statement[] = [];
    const frames = await framesOf({ skus: ["NONE"] }, { heartbeatMs: 10, lifetimeMs: 150 }, { account: a, statements });
    const text: string[] = [];
    for await (const frame of frames) text.push(frame);
    const present = statements.find((statement) => /from "events"/i.test(statement.sql))!;
    const { meta } = await env.DB.prepare(present.sql)
      .bind(...present.params)
      .all();
    expect(meta.rows_read).toBeLessThanOrEqual(4);
    expect(text.some((frame) => frame.includes("data:"))).toBe(false);
    expect(text.at(-1)).toMatch(new RegExp(`\\nid: ${catalogueNewest}\\n\\n$`));
    for (const event of own) expect(text.join("")).not.toContain(event.id);

    // Another account's event id as a cursor is answered as an unknown one (410), so no answer tells it exists.
    const unknown = newEventId(at);
    const { detail: unknownDetail } = await expectJson(await call("GET", `/events?after=${unknown}`, { token: a.key }), 410);
    for (const event of own) {
      const { detail } = await expectJson(await call("GET", `/events?after=${event.id}`, { token: a.key }), 410);
      expect(detail).toBe(unknownDetail.replace(unknown, event.id));
    }
    const resumed = await expectJson(await call("GET", `/events?after=${catalogueNewest}`, { token: a.key }), 200);
    for (const event of own) expect(JSON.stringify(resumed)).not.toContain(event.id);
  });

  /** Opens a stream for the key, shows it live, applies `change`, then commits an event: the stream must end without it. */
  async function endsWithItsKey(key: string, change: () => Promise<void>, headers: Record<string, string> = {}) {
    const sku = newSku();
    const stream = readFrames(await openStream(key, `?skus=${encodeURIComponent(sku)}`, headers));
    try {
      await ingest([{ sku, price: "5.00" }]);
      await ingest([{ sku, price: "4.00" }]);
      await settled(() => expect(stream.sentIds()).toHaveLength(1), 20);
      await change();
      await ingest([{ sku, price: "3.00" }]);
      await settled(() => expect(stream.ended).resolves.toBeUndefined(), 50);
      expect(stream.sentIds()).toEqual([(await eventIdsOf(sku))[0]]);
    } finally {
      await stream.close();
    }
  }

  it("ends with its key, sending nothing after: DELETE", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "premium" });
    await endsWithItsKey(key, async () => void (await expectJson(await call("DELETE", `/api-keys/${keyId}`, { token }), 200)));
  });

  it("ends with its key, sending nothing after: a leak report", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    await endsWithItsKey(key, async () => void (await expectJson(await report([found(key)]), 200)));
  });

  it("ends with its key, sending nothing after: a scope PATCH without events:read, and allowed_ips without its client", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "premium" });
    await endsWithItsKey(
      key,
      async () => void (await expectJson(await call("PATCH", `/api-keys/${keyId}`, { token, body: { scopes: ["products:read"] } }), 200)),
    );
    const other = await addKey(token);
    await endsWithItsKey(
      other.key,
      async () =>
        void (await expectJson(await call("PATCH", `/api-keys/${other.id}`, { token, body: { allowed_ips: ["192.0.2.1"] } }), 200)),
      { "CF-Connecting-IP": "198.51.100.7" },
    );
  });

  it("ends with its key, sending nothing after: the end of a rotation's grace", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "premium" });
    await endsWithItsKey(key, async () => {
      await expectJson(await call("POST", `/api-keys/${keyId}/rotate`, { token, body: { grace_seconds: 1 } }), 201);
      // The grace is over once the key is refused.
      await settled(async () => expect((await call("GET", "/competitors", { token: key })).status).toBe(401), 200);
    });
  });

  it("the events a stream sends count no request against its key", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const sku = newSku();
    const opened = await openStream(key, `?skus=${encodeURIComponent(sku)}`);
    const stream = readFrames(opened);
    try {
      await ingest([{ sku, price: "5.00" }]);
      await ingest([{ sku, price: "4.00" }]);
      await settled(() => expect(stream.sentIds()).toHaveLength(1), 20);
      await ingest([{ sku, price: "3.00" }]);
      await settled(() => expect(stream.sentIds()).toHaveLength(2), 20);
      // Two writes, nothing asked of the key's object; the key's next request is its second counted.
      const next = await call("GET", "/competitors", { token: key });
      expect(rateLimitOf(next).remaining).toBe(rateLimitOf(opened).remaining! - 1);
    } finally {
      await stream.close();
    }
  });

  it(`an account holds at most ${MAX_STREAMS_PER_ACCOUNT} streams over all its keys: the next is 429 naming that cap`, async () => {
    const { token, key } = await freshAccount({ plan: "premium" });
    const keys = [key];
    while (keys.length * MAX_STREAMS_PER_KEY <= MAX_STREAMS_PER_ACCOUNT) keys.push((await addKey(token)).key);
    const open: Response[] = [];
    try {
      for (let i = 0; i < MAX_STREAMS_PER_ACCOUNT; i++) {
        const res = await openStream(keys[Math.floor(i / MAX_STREAMS_PER_KEY)]!);
        expect(res.status).toBe(200);
        open.push(res);
      }
      const refused = await openStream(keys.at(-1)!);
      expect((await expectJson<{ detail: string }>(refused, 429)).detail).toContain(
        `account already has ${MAX_STREAMS_PER_ACCOUNT} event streams open`,
      );
    } finally {
      for (const res of open) await res.body!.cancel();
    }
  });

  it("without Last-Event-ID, after or since, starts at the present: no old event, and two D1 reads before going live", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const sku = newSku();
    await storePriceChanges(3_000, sku);
    const stream = readFrames(await openStream(key, `?skus=${encodeURIComponent(sku)}`));
    try {
      await settled(() => expect(stream.frames.join("\n")).toContain(": connected"));
      await ingest([{ sku, price: "5.00" }]);
      await ingest([{ sku, price: "4.00" }]);
      const newest = (await eventIdsOf(sku)).at(-1);
      await settled(() => expect(stream.sentIds()).toEqual([newest]), 20);
    } finally {
      await stream.close();
    }
    // The work before going live: everything up to the first heartbeat.
    const statements: Statement[] = [];
    const frames = await framesOf({ skus: [sku] }, { heartbeatMs: 10, lifetimeMs: 60_000 }, { statements });
    for await (const frame of frames) if (frame === ": keep-alive\n\n") break;
    // The key's expiry and where the present is, read side by side.
    expect(statements.map((statement) => statement.sql.match(/^(\w+) .* from "(\w+)"/i)?.slice(1)).sort()).toEqual([
      ["select", "api_keys"],
      ["select", "events"],
    ]);
  });

  it(`a backfill examines at most ${BACKFILL_EXAMINED_MAX.toLocaleString("en")} events, then sends the last one's id alone and ends; a resume continues from there`, async () => {
    const { key } = await freshAccount({ plan: "premium" });
    const [watched, other] = [newSku(), newSku()];
    const since = new Date().toISOString();
    await storePriceChanges(BACKFILL_EXAMINED_MAX + 500, other);
    const examined = (await eventIdsOf(other))[BACKFILL_EXAMINED_MAX - 1]!;
    const query = `?since=${since}&skus=${encodeURIComponent(watched)}`;
    const first = readFrames(await openStream(key, query));
    await vi.waitFor(() => expect(first.ended).resolves.toBeUndefined(), { timeout: 20_000, interval: 100 });
    expect(first.sentIds()).toEqual([]);
    expect(first.frames.at(-1)).toBe(`id: ${examined}`);

    await ingest([{ sku: watched, price: "5.00" }]);
    await ingest([{ sku: watched, price: "4.00" }]);
    const resumed = readFrames(await openStream(key, `?skus=${encodeURIComponent(watched)}`, { "Last-Event-ID": examined }));
    try {
      await settled(async () => expect(resumed.sentIds()).toEqual(await eventIdsOf(watched)), 50);
    } finally {
      await resumed.close();
    }
  });
});

describe("pushed, not polled", { timeout: 30_000 }, () => {
  it("a change reaches streams opened through different requests, of accounts on different hubs", async () => {
    const a = await freshAccount({ plan: "premium" });
    let b = await freshAccount({ plan: "premium" });
    while (hubOf(env, b.sub).id.equals(hubOf(env, a.sub).id)) b = await freshAccount({ plan: "premium" });
    const sku = newSku();
    await ingest([{ sku, price: "5.00" }]);
    const streams = [readFrames(await openStream(a.key, `?skus=${encodeURIComponent(sku)}`)), readFrames(await openStream(b.key))];
    try {
      for (const stream of streams) await settled(() => expect(stream.frames.join("\n")).toContain(": connected"));
      await ingest([{ sku, price: "4.00" }]);
      const [change] = await eventIdsOf(sku);
      for (const stream of streams) await settled(() => expect(stream.sentIds()).toEqual([change]), 10);
    } finally {
      for (const stream of streams) await stream.close();
    }
  });

  it("a hub restarted between two publishes loses nothing: the stream ends, and its client catches up with Last-Event-ID", async () => {
    const { sub, key } = await freshAccount({ plan: "premium" });
    const sku = newSku();
    await ingest([{ sku, price: "10.00" }]);
    const net = network(key);
    const received: string[] = [];
    const source = new EventSource(`https://api.test/events/stream?skus=${encodeURIComponent(sku)}`, { fetch: net.fetch });
    source.addEventListener("price.changed", (message) => {
      received.push(message.lastEventId);
    });
    try {
      await settled(() => expect(source.readyState).toBe(EventSource.OPEN)); // its response began: it is subscribed
      await ingest([{ sku, price: "9.00" }]);
      await settled(() => expect(received).toHaveLength(1), 10);
      const before = received.length;
      // The hub goes away (as on an eviction or a deploy): its sockets with it.
      await runInDurableObject(hubOf(env, sub), (_, state: DurableObjectState) => state.abort("the test restarts the hub")).catch(
        () => undefined,
      );
      await ingest([{ sku, price: "1.00" }]);
      await settled(() => expect(received.length).toBeGreaterThan(before), 20);
      // Reconnected with the last id it had, and caught up from D1: every change once, in commit order.
      expect(net.requests.length).toBeGreaterThanOrEqual(2);
      expect(net.requests[1]!.headers.get("Last-Event-ID")).toBe(received[before - 1]);
      expect(received).toEqual(await eventIdsOf(sku));
    } finally {
      source.close();
    }
  });

  it("a key's revocation ends its streams within a second", async () => {
    const { token, key, keyId } = await freshAccount({ plan: "premium" });
    const streams = [readFrames(await openStream(key)), readFrames(await openStream(key, "?type=stock.changed"))];
    for (const stream of streams) await settled(() => expect(stream.frames.join("\n")).toContain(": connected"));
    const revoked = Date.now();
    await expectJson(await call("DELETE", `/api-keys/${keyId}`, { token }), 200);
    await Promise.all(streams.map((stream) => stream.ended));
    expect(Date.now() - revoked).toBeLessThan(1_000);
    for (const stream of streams) expect(stream.frames.at(-1)).toBe(": this API key no longer admits this stream; the stream ends");
  });
});

describe("a hub's stored rules", { timeout: 30_000 }, () => {
  it("a rule too big for a socket's attachment is kept in the hub's storage while its stream is open, and matches as any other", async () => {
    const { sub, key } = await freshAccount({ plan: "premium" });
    const sku = newSku();
    const skus = [sku, ...Array.from({ length: 60 }, (_, i) => `OTHER-${i}-${"x".repeat(30)}`)];
    const stored = () =>
      runInDurableObject(hubOf(env, sub), (_, state: DurableObjectState) =>
        state.storage.sql.exec("SELECT count(*) AS n FROM sqlite_master WHERE name = 'rules'").one().n === 0
          ? 0
          : Number(state.storage.sql.exec("SELECT count(*) AS n FROM rules").one().n),
      );
    const before = await stored();
    await ingest([{ sku, price: "5.00" }]);
    const stream = readFrames(await openStream(key, `?${skus.map((s) => `skus=${encodeURIComponent(s)}`).join("&")}`));
    try {
      await settled(() => expect(stream.frames.join("\n")).toContain(": connected"));
      expect(await stored()).toBe(before + 1);
      await ingest([{ sku, price: "4.00" }]);
      await settled(async () => expect(stream.sentIds()).toEqual(await eventIdsOf(sku)), 10);
    } finally {
      await stream.close();
    }
    await settled(async () => expect(await stored()).toBe(before));
  });
});
