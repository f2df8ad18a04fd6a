import { env } from "cloudflare:workers";
import { count, eq } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { database } from "../../src/platform/db.ts";
import { webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { decryptSecret } from "../../src/webhooks/secrets.ts";
import { MAX_WEBHOOKS_PER_ACCOUNT } from "../../src/webhooks/service.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, runQueue } from "../helpers/webhooks.ts";

const db = () => database(env.DB);
let receiver: Receiver;

beforeEach(() => {
  receiver = installReceiver();
});
afterEach(() => {
  receiver.assertNoStrayRequests();
  vi.restoreAllMocks();
});

describe("POST /webhooks", () => {
  it("201 with the secret, once; defaults: both events, min_change_pct 0, enabled", async () => {
    const token = (await freshAccount()).token;
    const url = hookUrl();
    const res = await call("POST", "/webhooks", { token, body: { url } });
    const created = await expectJson(res, 201);
    expect(res.headers.get("Cache-Control")).toBe("no-store");
    expect(created).toEqual({
      id: expect.stringMatching(/^whk_[0-9a-f]{32}$/),
      url,
      description: null,
      environment: "live",
      events: ["price.changed", "stock.changed"],
      min_change_pct: 0,
      filters: null,
      status: "enabled",
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      created_at: expect.any(String),
      disabled_at: null,
      disabled_reason: null,
      source: "webhook",
      expires_at: null,
    });
    const { secret, ...view } = created;
    expect(await expectJson(await call("GET", `/webhooks/${created.id}`, { token }), 200)).toEqual(view);
    expect(await expectJson(await call("GET", "/webhooks", { token }), 200)).toEqual({ webhooks: [view] });
    expect(JSON.stringify(await (await call("GET", "/webhooks", { token })).json())).not.toContain(secret);
  });

  it("keeps the options it is given", async () => {
    const token = (await freshAccount()).token;
    const created = await createWebhook(token, {
      url: hookUrl(),
      events: ["stock.changed"],
      min_change_pct: 2.5,
      description: "  ERP sync  ",
    });
    expect(created).toMatchObject({ events: ["stock.changed"], min_change_pct: 2.5, description: "ERP sync" });
  });

  it("stores the secret only encrypted, bound to the webhook's id", async () => {
    const token = (await freshAccount()).token;
    const created = await createWebhook(token, { url: hookUrl() });
    const row = await db().select().from(webhooks).where(eq(webhooks.id, created.id)).get();
    expect(JSON.stringify(row)).not.toContain(created.secret.slice("whsec_".length));
    expect(row!.secretCiphertext).toMatch(/^v1\./);
    expect(await decryptSecret(env.WEBHOOK_SECRET_KEY!, { webhookId: created.id, stored: row!.secretCiphertext })).toBe(created.secret);
    await expect(decryptSecret(env.WEBHOOK_SECRET_KEY!, { webhookId: "whk_other", stored: row!.secretCiphertext })).rejects.toThrow();
  });

  const invalid: [string, unknown, RegExp][] = [
    ["no url", {}, /url: is required/],
    ["a url that is not a URL", { url: "hooks" }, /url: must be an absolute URL/],
    [
      "an unknown event type",
      { url: "https://hooks.example.com/", events: ["price.dropped"] },
      /events\.0: must be one of price\.changed, stock\.changed/,
    ],
    ["an empty event list", { url: "https://hooks.example.com/", events: [] }, /events: must name at least one event type/],
    ["a negative min_change_pct", { url: "https://hooks.example.com/", min_change_pct: -1 }, /min_change_pct: must be between 0 and 1000/],
    ["a min_change_pct as a string", { url: "https://hooks.example.com/", min_change_pct: "5" }, /min_change_pct: must be a number/],
    [
      "a min_change_pct with 3 decimals",
      { url: "https://hooks.example.com/", min_change_pct: 0.125 },
      /min_change_pct: must have at most 2 decimals/,
    ],
    ["an unknown field", { url: "https://hooks.example.com/", secret: "whsec_mine" }, /secret/],
  ];
  for (const [what, body, detail] of invalid) {
    it(`400 for ${what}, nothing written`, async () => {
      const token = (await freshAccount()).token;
      const before = (await db().select({ n: count() }).from(webhooks))[0]!.n;
      expect((await expectJson(await call("POST", "/webhooks", { token, body }), 400)).detail).toMatch(detail);
      expect((await db().select({ n: count() }).from(webhooks))[0]!.n).toBe(before);
    });
  }

  it(`at most ${MAX_WEBHOOKS_PER_ACCOUNT} per account, also when created at once: then 409`, async () => {
    const token = (await freshAccount()).token;
    const responses = await Promise.all(
      Array.from({ length: MAX_WEBHOOKS_PER_ACCOUNT + 3 }, () => call("POST", "/webhooks", { token, body: { url: hookUrl() } })),
    );
    expect(responses.filter((r) => r.status === 201)).toHaveLength(MAX_WEBHOOKS_PER_ACCOUNT);
    const refused = responses.filter((r) => r.status === 409);
    expect(refused).toHaveLength(3);
    expect(((await refused[0]!.json()) as ApiError).detail).toMatch(/already has 20 webhooks/);
  });

  it("is for account logins: an API key gets 403, no credential 401", async () => {
    const { key } = await freshAccount({ plan: "free" });
    expect((await call("POST", "/webhooks", { token: key, body: { url: hookUrl() } })).status).toBe(403);
    expect((await call("GET", "/webhooks", {})).status).toBe(401);
  });
});

describe("another account's webhooks", () => {
  it("are 404 for GET, DELETE, test and deliveries, and are not listed", async () => {
    const owner = (await freshAccount()).token;
    const other = (await freshAccount()).token;
    const { id } = await createWebhook(owner, { url: hookUrl() });
    for (const [method, path] of [
      ["GET", `/webhooks/${id}`],
      ["DELETE", `/webhooks/${id}`],
      ["POST", `/webhooks/${id}/test`],
      ["GET", `/webhooks/${id}/deliveries`],
    ] as const) {
      expect((await expectJson<ApiError>(await call(method, path, { token: other }), 404)).detail).toMatch(/No webhook/);
    }
    expect(await expectJson(await call("GET", "/webhooks", { token: other }), 200)).toEqual({ webhooks: [] });
    await expectJson(await call("GET", `/webhooks/${id}`, { token: owner }), 200);
  });
});

describe("DELETE /webhooks/:id", () => {
  it("204; the webhook and its delivery records are gone, and queued deliveries to it are dropped", async () => {
    const token = (await freshAccount()).token;
    const { id, url } = await createWebhook(token, { url: hookUrl() });
    await runQueue([deliveryTo(id)]);
    expect(await db().select({ n: count() }).from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, id))).toEqual([{ n: 1 }]);

    const res = await call("DELETE", `/webhooks/${id}`, { token });
    expect(res.status).toBe(204);
    expect((await call("GET", `/webhooks/${id}`, { token })).status).toBe(404);
    expect((await call("DELETE", `/webhooks/${id}`, { token })).status).toBe(404);
    expect(await db().select({ n: count() }).from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, id))).toEqual([{ n: 0 }]);

    const result = await runQueue([deliveryTo(id)]);
    expect(result.explicitAcks).toEqual(result.ids);
    expect(receiver.to(url)).toHaveLength(1); // only the delivery from before the DELETE
  });
});

describe("POST /webhooks/:id/test", () => {
  it("202, then a webhook.test event arrives through the queue, signed so that standardwebhooks verifies it, and is listed", async () => {
    const token = (await freshAccount()).token;
    const { id, url, secret } = await createWebhook(token, { url: hookUrl(), events: ["stock.changed"] });
    const queued = await expectJson(await call("POST", `/webhooks/${id}/test`, { token }), 202);
    expect(queued).toEqual({ event_id: expect.stringMatching(/^evt_/), type: "webhook.test", status: "queued" });

    // The real queue and consumer of the test runtime deliver it (batches wait up to 1 s).
    await settled(() => expect(receiver.to(url)).toHaveLength(1), 50);
    const [request] = receiver.to(url);
    expect(request!.headers["webhook-id"]).toBe(queued.event_id);
    expect(verifyWithLibrary(secret, request!)).toEqual({
      type: "webhook.test",
      timestamp: expect.any(String),
      data: { event_id: queued.event_id, webhook_id: id, message: expect.any(String) },
    });

    await settled(async () => {
      const { deliveries } = await expectJson(await call("GET", `/webhooks/${id}/deliveries`, { token }), 200);
      expect(deliveries).toEqual([
        {
          event_id: queued.event_id,
          type: "webhook.test",
          attempt: 1,
          status_code: 200,
          error: null,
          duration_ms: expect.any(Number),
          outcome: "delivered",
          attempted_at: expect.any(String),
          delivered_at: expect.any(String),
          response_excerpt: "ok", // the test receiver's answer
          payload: null, // a test event has no row in the events table
        },
      ]);
    });
  });

  it("409 for a disabled webhook", async () => {
    const token = (await freshAccount()).token;
    const { id } = await createWebhook(token, { url: hookUrl() });
    await db().update(webhooks).set({ status: "disabled", disabledReason: "The endpoint answered 410 Gone." }).where(eq(webhooks.id, id));
    expect((await expectJson(await call("POST", `/webhooks/${id}/test`, { token }), 409)).detail).toMatch(
      /disabled \(The endpoint answered 410 Gone\.\)/,
    );
  });
});
