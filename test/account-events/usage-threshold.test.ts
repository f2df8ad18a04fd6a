import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ACCOUNT_EVENTS } from "../../src/account-events/schema.ts";
import { hashApiKey } from "../../src/api-keys/format.ts";
import { announceUsage } from "../../src/api-keys/object/usage-threshold.ts";
import { eventMessageOf } from "../../src/events/outbox.ts";
import { database } from "../../src/platform/db.ts";
import { fanOut } from "../../src/webhooks/delivery/rows.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { factSources } from "../helpers/sandbox.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl } from "../helpers/webhook-receiver.ts";
import { createWebhook } from "../helpers/webhooks.ts";

/**
 * usage.threshold through the real path: requests through the worker, the key's object counting them and
 * writing the event on the admission that reaches 80 % and 100 % of the day's quota (a quota of 10,
 * pushed to the object as a plan change would be, so the test sends a dozen requests, not 14,400).
 */

const schema = ACCOUNT_EVENTS.find(([, type]) => type === "usage.threshold")![0];
type Row = { id: string; payload: string; relayed_at: string | null };
const noticesOf = async (keyId: string) =>
  (
    await env.DB.prepare(
      "SELECT id, payload, relayed_at FROM events WHERE type = 'usage.threshold' AND json_extract(payload, '$.data.key_id') = ? ORDER BY seq",
    )
      .bind(keyId)
      .all<Row>()
  ).results;

describe("usage.threshold", () => {
  it("is written once at 80 % and once at 100 % of the day quota, by the admission that reaches it, never in GET /events", async () => {
    const { key, keyId, sub, token } = await freshAccount({ plan: "premium" });
    const hook = await createWebhook(token, { url: hookUrl("usage"), events: ["usage.threshold"] });
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));
    const get = () => call("GET", "/competitors", { token: key });
    await expectJson(await get(), 200); // the object knows the key now: 1 of the day
    await stub.setLimits({ per_minute: 1000, per_hour: 1000, per_day: 10 });

    for (let i = 2; i <= 7; i++) await expectJson(await get(), 200);
    expect(await noticesOf(keyId)).toEqual([]); // 70 %: nothing
    await expectJson(await get(), 200); // the 8th: 80 %
    await settled(async () => expect(await noticesOf(keyId)).toHaveLength(1)); // written off the request path
    for (let i = 9; i <= 10; i++) await expectJson(await get(), 200); // the 10th: 100 %
    for (let i = 0; i < 3; i++) await expectJson(await get(), 429); // refused: nothing more
    await settled(async () => expect(await noticesOf(keyId)).toHaveLength(2));

    const rows = await noticesOf(keyId);
    const events = rows.map((row) => JSON.parse(row.payload));
    for (const event of events) expect(schema.parse(event)).toEqual(event);
    expect(events.map((event) => event.data)).toEqual([
      {
        account_id: sub,
        key_id: keyId,
        prefix: key.slice(0, events[0].data.prefix.length),
        period: "day",
        limit: 10,
        used: 8,
        threshold: 80,
      },
      {
        account_id: sub,
        key_id: keyId,
        prefix: key.slice(0, events[0].data.prefix.length),
        period: "day",
        limit: 10,
        used: 10,
        threshold: 100,
      },
    ]);
    expect(rows.every((row) => row.relayed_at === null)).toBe(true); // the outbox sweep relays them

    const listed = await expectJson(await call("GET", "/account/events?type=usage.threshold", { token }), 200);
    expect(listed.events.map((event) => event.id)).toEqual(rows.map((row) => row.id));
    const deliveries = await fanOut(
      factSources(database(env.DB)),
      rows.map((row) => eventMessageOf({ ...row, type: "usage.threshold", timestamp: "", oldMinor: null, newMinor: null })),
    );
    expect(deliveries.map((delivery) => delivery.webhook_id)).toEqual([hook.id, hook.id]);
    const other = await freshAccount();
    const publicFeed = await expectJson(await call("GET", "/events?type=price.changed&limit=1000", { token: other.key }), 200);
    expect(publicFeed.events.map((event) => event.id)).not.toContain(rows[0]!.id);
  });

  it("once, whatever retries: the same notice written again, or by the object's alarm after a failure, adds nothing; a lost one is written again", async () => {
    const { key, keyId } = await freshAccount({ plan: "premium" });
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(await hashApiKey(key)));
    await expectJson(await call("GET", "/competitors", { token: key }), 200);
    await stub.setLimits({ per_minute: 1000, per_hour: 1000, per_day: 5 });
    for (let i = 2; i <= 4; i++) await expectJson(await call("GET", "/competitors", { token: key }), 200); // 4 of 5: 80 %
    await settled(async () => expect(await noticesOf(keyId)).toHaveLength(1));
    const [written] = await noticesOf(keyId);

    const dayStart = Date.now() - (Date.now() % 86_400_000);
    const again = { keyId, dayStart, perDay: 5, threshold: 80 as const, at: new Date().toISOString() };
    await Promise.all([announceUsage(database(env.DB), [again]), announceUsage(database(env.DB), [again])]);
    expect(await noticesOf(keyId)).toEqual([written]);

    // As if the object's write had failed: the flag it stores, then its alarm.
    await env.DB.prepare("DELETE FROM events WHERE id = ?").bind(written!.id).run();
    const failed = (state: DurableObjectState) =>
      Promise.all([state.storage.put("usage_notice_pending", true), state.storage.setAlarm(Date.now())]);
    await runInDurableObject(stub, (_, state) => failed(state));
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const rewritten = await noticesOf(keyId);
    expect(rewritten.map((row) => row.id)).toEqual([written!.id]); // the same id: a receiver drops it if it had it
    expect(await runInDurableObject(stub, (_, state) => state.storage.get("usage_notice_pending"))).toBeUndefined();
    await runInDurableObject(stub, (_, state) => failed(state));
    await runDurableObjectAlarm(stub);
    expect(await noticesOf(keyId)).toHaveLength(1);
  });
});
