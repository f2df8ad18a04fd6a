import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { DeliveryMessage, EventMessage, WebhookMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { fanOut } from "../../src/webhooks/delivery/rows.ts";
import { call, expectJson } from "../helpers/http.ts";
import { postMcp, toolCall } from "../helpers/mcp.ts";
import { factSources, testAccount } from "../helpers/sandbox.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, ingest } from "../helpers/webhooks.ts";

/**
 * Sandbox events (contract, "Test mode"): a change made with POST /test/observations reaches only its account's test
 * keys (GET /events, the stream, /mcp) and test webhooks; a live event never reaches a test webhook or a test key;
 * nothing of one account's sandbox reaches another account. Each "never" is its own test.
 */

let receiver: Receiver;
beforeAll(() => {
  receiver = installReceiver();
});
afterAll(() => vi.restoreAllMocks());

let nth = 0;
/** A price change to a sandbox product (a different one each call), with the account's test key; returns its SKU. */
async function sandboxChange(testKey: string): Promise<{ sku: string; eventIds: string[] }> {
  const sku = `TEST-MN-${String(3 + 8 * (++nth % 100)).padStart(4, "0")}`;
  const { products } = await expectJson(await call("GET", `/products?sku=${sku}`, { token: testKey }), 200);
  const offer = products[0]!.offers[0]!;
  const cents = Math.round(Math.random() * 1e6);
  const price = offer.currency === "JPY" ? String(cents) : (cents / 100).toFixed(2);
  const observation = {
    sku,
    name: "x",
    competitor: { id: offer.competitor_id, name: "x" },
    price,
    currency: offer.currency,
    in_stock: true,
  };
  const answer = await expectJson(await call("POST", "/test/observations", { token: testKey, body: { observations: [observation] } }), 200);
  expect(answer.price_changes).toBe(1);
  const { events } = await expectJson(await call("GET", `/events?type=price.changed`, { token: testKey }), 200);
  return { sku, eventIds: events.filter((e) => (e.data as { sku: string }).sku === sku).map((e) => e.id) };
}

const feedIds = async (key: string) => {
  const { events } = await expectJson(await call("GET", "/events?limit=1000", { token: key }), 200);
  return events.map((e) => e.id);
};

describe("GET /events", () => {
  it("a test key sees its account's sandbox events, with the live feed's shape", async () => {
    const { testKey } = await testAccount();
    const { sku, eventIds } = await sandboxChange(testKey);
    expect(eventIds).toHaveLength(1);
    const { events } = await expectJson(await call("GET", "/events", { token: testKey }), 200);
    expect(events.map((e) => e.id)).toEqual(eventIds);
    expect(events[0]).toMatchObject({ type: "price.changed", data: { sku, event_id: eventIds[0] } });
  });

  it("a live key never sees sandbox events, its own account's included", async () => {
    const { key: live, testKey } = await testAccount();
    const { eventIds } = await sandboxChange(testKey);
    expect(await feedIds(live)).not.toContain(eventIds[0]);
  });

  it("a test key never sees live events", async () => {
    const { testKey } = await testAccount();
    const sku = `LIVE-EV-${Date.now()}`;
    await ingest([{ sku, price: "10.00" }]);
    await ingest([{ sku, price: "11.00" }]);
    const { events } = await expectJson(await call("GET", "/events?limit=1000", { token: testKey }), 200);
    expect(events).toEqual([]);
  });

  it("one account's sandbox events never reach another account's test key, nor any account's GET /account/events", async () => {
    const [a, b] = [await testAccount(), await testAccount()];
    const { eventIds } = await sandboxChange(a.testKey);
    expect(await feedIds(b.testKey)).toEqual([]);
    const own = await expectJson(await call("GET", "/account/events", { token: a.token }), 200);
    expect(own.events.map((e) => e.id)).not.toContain(eventIds[0]);
    // A cursor naming another account's sandbox event is as unknown as a made-up one.
    await expectJson(await call("GET", `/events?after=${eventIds[0]}`, { token: b.testKey }), 410);
  });
});

describe("webhooks", () => {
  const catalogueEvent = (sku: string, sandbox?: string): EventMessage => {
    const id = `evt_${crypto.randomUUID().replaceAll("-", "")}`;
    return {
      kind: "event",
      event: { id, type: "price.changed", timestamp: new Date().toISOString(), data: { event_id: id, sku, competitor_id: "test_harbor" } },
      price_change: { old_minor: 1000, new_minor: 900 },
      ...(sandbox && { sandbox_account_id: sandbox }),
    };
  };
  const fannedTo = async (message: EventMessage) =>
    (await fanOut(factSources(database(env.DB)), [message])).map((delivery: DeliveryMessage) => delivery.webhook_id);

  it("a test webhook takes only catalogue event types; its record shows its environment", async () => {
    const { token } = await testAccount();
    const created = await createWebhook(token, { url: hookUrl(), environment: "test" });
    expect(created).toMatchObject({ environment: "test", events: ["price.changed", "stock.changed"] });
    const refused = await call("POST", "/webhooks", { token, body: { url: hookUrl(), environment: "test", events: ["api_key.leaked"] } });
    expect((await expectJson(refused, 400)).detail).toMatch(/events: a test webhook receives only/);
    const patched = await call("PATCH", `/webhooks/${created.id}`, { token, body: { events: ["usage.threshold"] } });
    expect((await expectJson(patched, 400)).detail).toMatch(/events: a test webhook receives only/);
  });

  it("a test webhook receives its account's sandbox events; a live webhook never does", async () => {
    const { sub, token } = await testAccount();
    const test = await createWebhook(token, { url: hookUrl(), environment: "test" });
    const live = await createWebhook(token, { url: hookUrl() });
    const fanned = await fannedTo(catalogueEvent("TEST-CF-0001", sub));
    expect(fanned).toContain(test.id);
    expect(fanned).not.toContain(live.id);
  });

  it("a test webhook never receives live events", async () => {
    const { token } = await testAccount();
    const test = await createWebhook(token, { url: hookUrl(), environment: "test" });
    const live = await createWebhook(token, { url: hookUrl() });
    const fanned = await fannedTo(catalogueEvent("TEST-CF-0001"));
    expect(fanned).toContain(live.id);
    expect(fanned).not.toContain(test.id);
  });

  it("one account's sandbox events never reach another account's test webhook", async () => {
    const [a, b] = [await testAccount(), await testAccount()];
    const theirs = await createWebhook(b.token, { url: hookUrl(), environment: "test", filters: { skus: ["TEST-CF-0001"] } });
    const ours = await createWebhook(a.token, { url: hookUrl(), environment: "test", filters: { skus: ["TEST-CF-0001"] } });
    const fanned = await fannedTo(catalogueEvent("TEST-CF-0001", a.sub));
    expect(fanned).toEqual([ours.id]);
    expect(fanned).not.toContain(theirs.id);
  });

  it("end to end: POST /test/observations, then the test webhook's delivery, signed; rules read the sandbox's products", async () => {
    const { token, testKey } = await testAccount();
    const testUrl = hookUrl("sandbox");
    const liveUrl = hookUrl("live");
    // A brand rule: the fan-out must read the brand from the sandbox, since events do not carry it.
    await createWebhook(token, { url: testUrl, environment: "test", filters: { brands: ["Dell", "LG", "Samsung", "ASUS", "BenQ"] } });
    await createWebhook(token, { url: liveUrl });
    const otherBrandUrl = hookUrl("other-brand");
    await createWebhook(token, { url: otherBrandUrl, environment: "test", filters: { brands: ["Sonos"] } });
    const { eventIds } = await sandboxChange(testKey);
    await settled(() => expect(receiver.to(testUrl)).toHaveLength(1), 20);
    const [delivery] = receiver.to(testUrl);
    expect(delivery!.headers["webhook-id"]).toBe(eventIds[0]);
    expect(JSON.parse(delivery!.body)).toMatchObject({ type: "price.changed", data: { event_id: eventIds[0] } });
    expect(receiver.to(liveUrl)).toEqual([]);
    expect(receiver.to(otherBrandUrl)).toEqual([]); // decided in the same fan-out as the delivery above
  });

  it("replay: a test webhook replays its account's sandbox events only; a live webhook never replays them", async () => {
    const { token, testKey } = await testAccount();
    const test = await createWebhook(token, { url: hookUrl(), environment: "test" });
    const live = await createWebhook(token, { url: hookUrl() });
    const { eventIds } = await sandboxChange(testKey);
    const sent = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
    try {
      const since = new Date(Date.now() - 60_000).toISOString();
      await expectJson(await call("POST", `/webhooks/${test.id}/replay`, { token, body: { since } }), 202);
      await expectJson(await call("POST", `/webhooks/${live.id}/replay`, { token, body: { since } }), 202);
      const queued = sent.mock.calls.flatMap(([batch]) => [...batch].map((m) => m.body as WebhookMessage));
      const toTest = queued.filter((m) => m.kind === "delivery" && m.webhook_id === test.id).map((m) => m.event.id);
      const toLive = queued.filter((m) => m.kind === "delivery" && m.webhook_id === live.id).map((m) => m.event.id);
      expect(toTest).toEqual(eventIds);
      expect(toLive).not.toContain(eventIds[0]);
    } finally {
      sent.mockRestore();
    }
  });
});

/** A stream read as it comes. */
function readStream(res: Response) {
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) return;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { text: () => text, close: () => reader.cancel().catch(() => undefined) };
}

describe("the stream", () => {
  it("a test key's backfill (since) reads its sandbox's events", async () => {
    const { testKey } = await testAccount();
    const since = new Date(Date.now() - 1000).toISOString();
    const { eventIds } = await sandboxChange(testKey);
    const res = await call("GET", `/events/stream?since=${encodeURIComponent(since)}`, {
      token: testKey,
      headers: { Accept: "text/event-stream" },
    });
    const stream = readStream(res);
    try {
      await settled(() => expect(stream.text()).toContain(`id: ${eventIds[0]}`), 20);
    } finally {
      await stream.close();
    }
  });

  it("a test key's stream gets its sandbox's events and never live ones; a live stream never gets sandbox ones", async () => {
    const { key: live, testKey } = await testAccount();
    const open = (key: string) => call("GET", "/events/stream", { token: key, headers: { Accept: "text/event-stream" } });
    const testStream = readStream(await open(testKey));
    const liveStream = readStream(await open(live));
    try {
      const { eventIds } = await sandboxChange(testKey);
      await settled(() => expect(testStream.text()).toContain(`id: ${eventIds[0]}`), 20);
      const sku = `LIVE-ST-${Date.now()}`;
      await ingest([{ sku, price: "10.00" }]);
      await ingest([{ sku, price: "12.00" }]);
      // Both streams are in the account's one hub, so a publish that reached one was decided for both.
      await settled(() => expect(liveStream.text()).toContain(`"sku":"${sku}"`), 20);
      expect(liveStream.text()).not.toContain(eventIds[0]);
      expect(testStream.text()).not.toContain(sku);
    } finally {
      await testStream.close();
      await liveStream.close();
    }
  });
});

const mcpCall = async (key: string, name: string, args: Record<string, unknown>) => {
  const res = await postMcp(key, toolCall(1, name, args));
  expect(res.status).toBe(200);
  // biome-ignore lint/suspicious/noExplicitAny: a JSON-RPC answer, checked field by field below
  return ((await res.json()) as any).result.structuredContent;
};

describe("/mcp", () => {
  it("a test key's tools read its sandbox: search, product, history, competitors and recent changes", async () => {
    const [a, b] = [await testAccount(), await testAccount()];
    const found = await mcpCall(a.testKey, "search_products", { brand: "Sonos", limit: 100 });
    expect(found.products.length).toBeGreaterThan(0);
    expect(found.products.every((p: { sku: string; brand: string }) => p.sku.startsWith("TEST-") && p.brand === "Sonos")).toBe(true);
    const text = await mcpCall(a.testKey, "search_products", { query: "espresso", limit: 5 });
    expect(text.products).toHaveLength(5);
    expect(text.truncated).toBe(true);
    // Word by word, in any order (the brand after the name's word), and each product with its lowest offer.
    const [espresso] = text.products as { id: string; brand: string; lowest_offer: unknown }[];
    const words = await mcpCall(a.testKey, "search_products", { query: `espresso ${espresso!.brand.toUpperCase()}`, limit: 100 });
    expect(words.products.map((p: { id: string }) => p.id)).toContain(espresso!.id);
    expect(espresso!.lowest_offer).toEqual(expect.objectContaining({ competitor_id: expect.stringMatching(/^test_/) }));
    const product = await mcpCall(a.testKey, "get_product", { sku: "TEST-CF-0001" });
    expect(product.sku).toBe("TEST-CF-0001");
    const history = await mcpCall(a.testKey, "price_history", { product_id: product.id, points: 2 });
    expect(history.history.length).toBeGreaterThan(0);
    const { competitors } = await mcpCall(a.testKey, "list_competitors", {});
    expect(competitors.every((c: { id: string }) => c.id.startsWith("test_"))).toBe(true);
    const { eventIds } = await sandboxChange(a.testKey);
    expect((await mcpCall(a.testKey, "recent_changes", {})).events.map((e: { id: string }) => e.id)).toEqual(eventIds);
    expect((await mcpCall(b.testKey, "recent_changes", {})).events).toEqual([]);
    // Newest first, paged back with after.
    const { eventIds: later } = await sandboxChange(a.testKey);
    const first = await mcpCall(a.testKey, "recent_changes", { limit: 1 });
    expect(first.events.map((e: { id: string }) => e.id)).toEqual(later);
    const second = await mcpCall(a.testKey, "recent_changes", { limit: 1, after: first.next_cursor });
    expect(second.events.map((e: { id: string }) => e.id)).toEqual(eventIds);
    expect((await mcpCall(a.key, "recent_changes", { limit: 100 })).events.map((e: { id: string }) => e.id)).not.toContain(eventIds[0]);
    expect((await mcpCall(a.key, "search_products", { query: "TEST-CF" })).products).toEqual([]);
  });
});

describe("usage", () => {
  it("GET /account/usage?environment= sums only that environment's keys", async () => {
    const { token, key: live, testKey } = await testAccount();
    for (let i = 0; i < 3; i++) await call("GET", "/competitors", { token: testKey });
    await call("GET", "/events", { token: live });
    const total = async (environment: string) => {
      const usage = await expectJson(await call("GET", `/account/usage?environment=${environment}`, { token }), 200);
      return usage.buckets.reduce((sum, b) => sum + b.admitted, 0);
    };
    expect(await total("test")).toBe(3);
    expect(await total("live")).toBe(1);
    await expectJson(await call("GET", "/account/usage?environment=staging", { token }), 400);
  });
});
