import { env } from "cloudflare:workers";
import { inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Schemas } from "../../client/index.ts";
import { announceExpiringKeys } from "../../src/account-events/expiring.ts";
import { ACCOUNT_EVENTS } from "../../src/account-events/schema.ts";
import { eventMessageOf } from "../../src/events/outbox.ts";
import { database } from "../../src/platform/db.ts";
import { events } from "../../src/platform/tables.ts";
import { DAY_MS } from "../../src/platform/time.ts";
import { fanOut } from "../../src/webhooks/delivery/rows.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { factSources } from "../helpers/sandbox.ts";
import { found, report } from "../helpers/secret-scanning.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, runEndpointNow, runQueue } from "../helpers/webhooks.ts";

/** An account event of one type: for a feed the query or the test's own doing restricts to that type. */
type AccountEventOf<Type extends Schemas["AccountFeedEvent"]["type"]> = Extract<Schemas["AccountFeedEvent"], { type: Type }>;

let receiver: Receiver;
beforeAll(() => {
  receiver = installReceiver();
});
afterAll(() => {
  receiver.assertNoStrayRequests();
  vi.restoreAllMocks();
});
const db = () => database(env.DB);

describe("GET /account/events", () => {
  it("lists the account's own events with the paging of GET /events; never another account's, never in GET /events", async () => {
    const alice = await freshAccount();
    const bob = await freshAccount();
    const second = await expectJson(await call("POST", "/api-keys", { token: alice.token, body: { name: "second" } }), 201);
    await expectJson(await report([found(alice.key), found(second.key, "https://gist.github.com/a/1", "gist")]), 200);

    const feed = await expectJson(await call("GET", "/account/events", { token: alice.token }), 200);
    expect((feed.events as AccountEventOf<"api_key.leaked">[]).map((e) => [e.type, e.data.key_id])).toEqual([
      ["api_key.leaked", alice.keyId],
      ["api_key.leaked", second.id],
    ]);
    expect(feed.events[1]!.data).toMatchObject({ account_id: alice.sub, url: "https://gist.github.com/a/1", source: "gist" });
    expect(feed.next_cursor).toBeNull();

    const page = await expectJson(await call("GET", "/account/events?limit=1", { token: alice.token }), 200);
    expect(page.events.map((e) => e.id)).toEqual([feed.events[0]!.id]);
    const next = await expectJson(
      await call("GET", `/account/events?after=${page.next_cursor}&type=api_key.leaked`, { token: alice.token }),
      200,
    );
    expect(next.events.map((e) => e.id)).toEqual([feed.events[1]!.id]);
    await expectJson(await call("GET", "/account/events?type=price.changed", { token: alice.token }), 400);

    expect((await expectJson(await call("GET", "/account/events", { token: bob.token }), 200)).events).toEqual([]);
    // Another account's event id is no cursor here, and the public feed never shows account events.
    await expectJson(await call("GET", `/account/events?after=${feed.events[0]!.id}`, { token: bob.token }), 410);
    const publicFeed = await expectJson(await call("GET", "/events?limit=1000", { token: bob.key }), 200);
    expect(publicFeed.events.map((e) => e.type)).not.toContain("api_key.leaked");
    await expectJson(await call("GET", "/account/events", { token: bob.key }), 403);
  });

  it("delivers to the account's own webhooks that subscribe to the type, and to no other", async () => {
    const alice = await freshAccount();
    const bob = await freshAccount();
    const subscribed = await createWebhook(alice.token, { url: hookUrl("alice-leaks"), events: ["api_key.leaked"] });
    await createWebhook(alice.token, { url: hookUrl("alice-prices"), events: ["price.changed"] });
    await createWebhook(bob.token, { url: hookUrl("bob-leaks"), events: ["api_key.leaked", "api_key.expiring"] });
    expect(subscribed.events).toEqual(["api_key.leaked"]);

    await expectJson(await report([found(alice.key)]), 200);
    const {
      events: [leak],
    } = await expectJson(await call("GET", "/account/events", { token: alice.token }), 200);
    const [row] = await db()
      .select()
      .from(events)
      .where(inArray(events.id, [leak!.id]));
    const deliveries = await fanOut(factSources(db()), [eventMessageOf(row!)]);
    expect(deliveries.map((d) => d.webhook_id)).toEqual([subscribed.id]);
    expect(deliveries[0]!.event).toMatchObject({
      id: leak!.id,
      type: "api_key.leaked",
      data: { account_id: alice.sub, key_id: alice.keyId },
    });
    // Replay sends a webhook its own account's events only.
    const bobsHook = (await expectJson(await call("GET", "/webhooks", { token: bob.token }), 200)).webhooks[0]!;
    const since = new Date(Date.now() - 60_000).toISOString();
    const replay = (token: string, id: string) => call("POST", `/webhooks/${id}/replay`, { token, body: { since } });
    expect((await expectJson(await replay(bob.token, bobsHook.id), 202)).queued).toBe(0);
    expect((await expectJson(await replay(alice.token, subscribed.id), 202)).queued).toBe(1);
  });
});

describe("api_key.expiring (the cron)", () => {
  it("announces 7 days and 1 day before expires_at, once each however many runs", async () => {
    const { token, sub } = await freshAccount();
    const now = Date.now();
    await expectJson(
      await call("POST", "/api-keys", { token, body: { name: "three days", expires_at: new Date(now + 3 * DAY_MS).toISOString() } }),
      201,
    );
    await expectJson(
      await call("POST", "/api-keys", { token, body: { name: "half a day", expires_at: new Date(now + DAY_MS / 2).toISOString() } }),
      201,
    );
    await expectJson(
      await call("POST", "/api-keys", { token, body: { name: "a month", expires_at: new Date(now + 30 * DAY_MS).toISOString() } }),
      201,
    );
    const rotatedAway = await expectJson(await call("POST", "/api-keys", { token, body: { name: "rotated" } }), 201);
    await expectJson(await call("POST", `/api-keys/${rotatedAway.id}/rotate`, { token, body: { grace_seconds: 3600 } }), 201);

    await Promise.all([announceExpiringKeys(db(), env.WEBHOOK_QUEUE, now), announceExpiringKeys(db(), env.WEBHOOK_QUEUE, now)]);
    await announceExpiringKeys(db(), env.WEBHOOK_QUEUE, now + 60_000);
    const notices = async () =>
      (
        (await expectJson(await call("GET", "/account/events?type=api_key.expiring", { token }), 200))
          .events as AccountEventOf<"api_key.expiring">[]
      ).map((e) => [e.data.name, e.data.days_left, e.data.account_id]);
    expect(await notices()).toEqual([
      ["half a day", 1, sub],
      ["three days", 7, sub],
    ]);
    // Two and a half days later the three-day key is in its last day.
    await announceExpiringKeys(db(), env.WEBHOOK_QUEUE, now + 2.5 * DAY_MS);
    await announceExpiringKeys(db(), env.WEBHOOK_QUEUE, now + 2.6 * DAY_MS);
    expect(await notices()).toEqual([
      ["half a day", 1, sub],
      ["three days", 7, sub],
      ["three days", 1, sub],
    ]);
  });
});

describe("webhook.disabled", () => {
  it("tells the account once when a 410 disables a webhook, with the reason", async () => {
    const { token, sub } = await freshAccount();
    const hook = await createWebhook(token, { url: hookUrl("gone") });
    receiver.respond(hook.url, () => new Response("gone", { status: 410 }));
    await runQueue([deliveryTo(hook.id)]);
    await runQueue([deliveryTo(hook.id)], 2); // a retry of another event in flight: already disabled
    const feed = await expectJson(await call("GET", "/account/events?type=webhook.disabled", { token }), 200);
    expect(feed.events).toHaveLength(1);
    const { id, ...event } = feed.events[0]!;
    const schema = ACCOUNT_EVENTS.find(([, type]) => type === "webhook.disabled")![0];
    expect(schema.parse(event)).toEqual(event);
    expect(event.data).toEqual({ account_id: sub, webhook_id: hook.id, url: hook.url, disabled_reason: "The endpoint answered 410 Gone." });
  });

  it("tells the account when five days of failures disable a webhook", async () => {
    const { token } = await freshAccount();
    const hook = await createWebhook(token, { url: hookUrl("down") });
    receiver.respond(hook.url, () => new Response("down", { status: 500 }));
    const start = Date.now();
    try {
      vi.useFakeTimers({ toFake: ["Date"], now: start });
      await runQueue([deliveryTo(hook.id)]);
      vi.setSystemTime(start + 5 * DAY_MS + 1000);
      await runQueue([deliveryTo(hook.id)], 3); // failing: handed to the webhook's object
      await runEndpointNow(hook.id);
    } finally {
      vi.useRealTimers();
    }
    const [row] = await env.DB.prepare(
      "SELECT payload FROM events WHERE type = 'webhook.disabled' AND json_extract(payload, '$.data.webhook_id') = ?",
    )
      .bind(hook.id)
      .all<{ payload: string }>()
      .then((r) => r.results);
    expect(JSON.parse(row!.payload).data.disabled_reason).toMatch(/^Every delivery has failed for 5 days/);
  });
});
