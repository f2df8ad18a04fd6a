import { env, exports } from "cloudflare:workers";
import { asc, like } from "drizzle-orm";
import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { database } from "../../src/platform/db.ts";
import { events } from "../../src/platform/tables.ts";
import { eventFrames, MAX_STREAMS_PER_KEY } from "../../src/stream/service.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson, rateLimitOf } from "../helpers/http.ts";
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
    const before = (await eventIdsOf("")).at(-1); // the feed's latest event before this test's changes
    await ingest([{ sku: watched, price: "9.00" }]);
    await ingest([{ sku: other, price: "9.00" }]);
    await ingest([{ sku: watched, price: "8.00" }]);

    const net = network(key);
    const received: { id: string; type: string; data: { timestamp: string; data: { sku: string; new_price: string } } }[] = [];
    const query = new URLSearchParams([...(before ? [["after", before]] : []), ["skus", watched], ["type", "price.changed"]]);
    const source = new EventSource(`https://api.test/events/stream?${query}`, { fetch: net.fetch });
    source.addEventListener("price.changed", (message) =>
      received.push({ id: message.lastEventId, type: message.type, data: JSON.parse(message.data) }),
    );
    try {
      await vi.waitFor(() => expect(received).toHaveLength(2), { timeout: 5_000, interval: 20 }); // the backfill
      await ingest([{ sku: watched, price: "7.00" }]);
      await vi.waitFor(() => expect(received).toHaveLength(3), { timeout: 5_000, interval: 20 }); // live

      const open = net.holdReconnects();
      net.drop();
      await ingest([{ sku: watched, price: "6.00" }]);
      await ingest([{ sku: other, price: "8.00" }]);
      await ingest([{ sku: watched, price: "5.00" }]);
      open();
      await vi.waitFor(() => expect(received).toHaveLength(5), { timeout: 10_000, interval: 20 });

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
    await vi.waitFor(
      async () => {
        const again = await call("GET", "/events/stream", { token: key });
        expect(again.status).toBe(200);
        open.push(again);
      },
      { timeout: 5_000, interval: 50 },
    );
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

describe("the stream's frames", () => {
  it("comment lines keep an idle stream open, and the server ends it after its lifetime (releasing its slot)", async () => {
    let ended = 0;
    const frames = await eventFrames(
      { db: db(), archive: env.ARCHIVE },
      {
        request: { after: undefined, since: new Date().toISOString(), rule: { minChangeBp: 0, filters: { skus: ["NONE"] } } },
        timing: { pollMs: 5, heartbeatMs: 10, lifetimeMs: 150 },
        onEnd: async () => {
          ended++;
        },
      },
    );
    const text: string[] = [];
    for await (const frame of frames) text.push(frame);
    expect(text[0]).toBe("retry: 1000\n: connected\n\n");
    expect(text).toContain(": keep-alive\n\n");
    expect(text.at(-1)).toContain("reconnect with Last-Event-ID");
    expect(text.some((frame) => frame.startsWith("id:"))).toBe(false);
    expect(ended).toBe(1);
  });
});
