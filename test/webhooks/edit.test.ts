import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { database } from "../../src/platform/db.ts";
import { webhooks } from "../../src/platform/tables.ts";
import { DISABLED_BY_ACCOUNT } from "../../src/webhooks/service.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";
import { hookUrl, installReceiver, type Receiver, verifyWithLibrary } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, runQueue } from "../helpers/webhooks.ts";

/** PATCH /webhooks/:id and POST /webhooks/:id/rotate-secret. */

const db = () => database(env.DB);
const rowOf = (id: string) => db().select().from(webhooks).where(eq(webhooks.id, id)).get();
let receiver: Receiver;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(() => {
  vi.useRealTimers();
  receiver.assertNoStrayRequests();
});
afterAll(() => vi.restoreAllMocks());

describe("PATCH /webhooks/:id", () => {
  it("changes the fields it is given, and only those", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl(), description: "first" });
    const url = hookUrl();
    const updated = await expectJson(
      await call("PATCH", `/webhooks/${hook.id}`, { token, body: { url, events: ["stock.changed"], min_change_pct: 2.5 } }),
      200,
    );
    expect(updated).toMatchObject({
      id: hook.id,
      url,
      events: ["stock.changed"],
      min_change_pct: 2.5,
      description: "first",
      status: "enabled",
    });
    expect(updated).not.toHaveProperty("secret");
    expect(await expectJson(await call("GET", `/webhooks/${hook.id}`, { token }), 200)).toEqual(updated);
    expect(await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { description: null } }), 200)).toMatchObject({
      description: null,
      url,
    });
  });

  it("disables by hand with the account's reason; enabling clears it", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const disabled = await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "disabled" } }), 200);
    expect(disabled).toMatchObject({ status: "disabled", disabled_at: expect.any(String), disabled_reason: DISABLED_BY_ACCOUNT });
    // Deliveries to it stop.
    await runQueue([deliveryTo(hook.id)]);
    expect(receiver.to(hook.url)).toEqual([]);

    await db()
      .update(webhooks)
      .set({ disabledReason: "The endpoint answered 410 Gone.", failingSince: new Date().toISOString() })
      .where(eq(webhooks.id, hook.id));
    const enabled = await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "enabled" } }), 200);
    expect(enabled).toMatchObject({ status: "enabled", disabled_at: null, disabled_reason: null });
    expect((await rowOf(hook.id))!.failingSince).toBeNull();
    await runQueue([deliveryTo(hook.id)]);
    expect(receiver.to(hook.url)).toHaveLength(1);
  });

  it('a status it already has (a stale card\'s "Disable") answers 200 with the record, unchanged', async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const enabled = await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "enabled" } }), 200);
    expect(enabled).toMatchObject({ id: hook.id, status: "enabled", disabled_at: null });
    const disabled = await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "disabled" } }), 200);
    const before = await rowOf(hook.id);
    expect(await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { status: "disabled" } }), 200)).toEqual(disabled);
    expect(await rowOf(hook.id)).toEqual(before);
  });

  it.each([
    [{}, "name at least one"],
    [{ url: "http://example.com/hook" }, "url"],
    [{ url: "https://127.0.0.1/hook" }, "url"],
    [{ events: [] }, "events"],
    [{ events: ["price.dropped"] }, "events"],
    [{ min_change_pct: -1 }, "min_change_pct"],
    [{ status: "paused" }, "status"],
    [{ secret: "whsec_x" }, "secret"],
  ])("400 for %j, naming %s; nothing written", async (body, field) => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const before = await rowOf(hook.id);
    const { detail } = await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body }), 400);
    expect(detail).toContain(field);
    expect(await rowOf(hook.id)).toEqual(before);
  });

  it("404 for another account's webhook, which stays as it was", async () => {
    const [alice, bob] = await Promise.all([freshAccount().then((a) => a.token), freshAccount().then((a) => a.token)]);
    const hook = await createWebhook(alice, { url: hookUrl() });
    const before = await rowOf(hook.id);
    await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token: bob, body: { status: "disabled" } }), 404);
    await expectJson(await call("POST", `/webhooks/${hook.id}/rotate-secret`, { token: bob, body: {} }), 404);
    expect(await rowOf(hook.id)).toEqual(before);
  });
});

describe("POST /webhooks/:id/rotate-secret", () => {
  it("answers the new secret once; during the grace deliveries carry both signatures, new then old, and standardwebhooks verifies either", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const res = await call("POST", `/webhooks/${hook.id}/rotate-secret`, { token, body: { grace_seconds: 3600 } });
    expect(res.headers.get("Cache-Control")).toBe("no-store");
    const rotated = await expectJson(res, 200);
    expect(rotated).toMatchObject({ id: hook.id, secret: expect.stringMatching(/^whsec_/) });
    expect(rotated.secret).not.toBe(hook.secret);
    expect(await expectJson(await call("GET", `/webhooks/${hook.id}`, { token }), 200)).not.toHaveProperty("secret");

    await runQueue([deliveryTo(hook.id)]);
    const [during] = receiver.to(hook.url);
    expect(during!.headers["webhook-signature"]).toMatch(/^v1,\S+ v1,\S+$/);
    expect(verifyWithLibrary(rotated.secret, during!)).toMatchObject({ type: "price.changed" });
    expect(verifyWithLibrary(hook.secret, during!)).toMatchObject({ type: "price.changed" });
    const [newFirst] = during!.headers["webhook-signature"]!.split(" ");
    expect(verifyWithLibrary(rotated.secret, { ...during!, headers: { ...during!.headers, "webhook-signature": newFirst! } })).toBeTruthy();

    // An hour later the grace is over: one signature, the new secret's; the old one no longer verifies.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 3601_000 });
    await runQueue([deliveryTo(hook.id)]);
    const after = receiver.to(hook.url)[1]!;
    expect(after.headers["webhook-signature"]).toMatch(/^v1,\S+$/);
    expect(verifyWithLibrary(rotated.secret, after)).toMatchObject({ type: "price.changed" });
    expect(() => verifyWithLibrary(hook.secret, after)).toThrow();
  });

  it("with grace_seconds 0 the old secret stops at once; the default grace is a day", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const rotated = await expectJson(await call("POST", `/webhooks/${hook.id}/rotate-secret`, { token, body: { grace_seconds: 0 } }), 200);
    await runQueue([deliveryTo(hook.id)]);
    const [request] = receiver.to(hook.url);
    expect(verifyWithLibrary(rotated.secret, request!)).toBeTruthy();
    expect(() => verifyWithLibrary(hook.secret, request!)).toThrow();

    const started = Date.now();
    await expectJson(await call("POST", `/webhooks/${hook.id}/rotate-secret`, { token, body: {} }), 200);
    const expires = Date.parse((await rowOf(hook.id))!.previousSecretExpiresAt!);
    expect(expires - started).toBeGreaterThanOrEqual(86_400_000 - 1000);
    expect(expires - started).toBeLessThanOrEqual(86_400_000 + 5000);
  });

  it("concurrent calls take effect one after another: the losers answer 409, and deliveries carry the last shown secret and the one shown before it", async () => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const responses = await Promise.all(
      Array.from({ length: 4 }, () => call("POST", `/webhooks/${hook.id}/rotate-secret`, { token, body: { grace_seconds: 3600 } })),
    );
    const shown: string[] = [];
    for (const res of responses) {
      if (res.status === 409) expect((await expectJson(res, 409)).detail).toContain("Another rotation");
      else shown.push((await expectJson(res, 200)).secret);
    }
    expect(shown.length).toBeGreaterThanOrEqual(1);

    await runQueue([deliveryTo(hook.id)]);
    const [request] = receiver.to(hook.url);
    const [newest, previous] = request!.headers["webhook-signature"]!.split(" ");
    const signedBy = (signature: string) =>
      [hook.secret, ...shown].filter((secret) => {
        try {
          return Boolean(verifyWithLibrary(secret, { ...request!, headers: { ...request!.headers, "webhook-signature": signature } }));
        } catch {
          return false;
        }
      });
    const [current] = signedBy(newest!);
    expect(shown).toContain(current);
    // The one shown just before it: the original when one call took effect, else another call's (never the original, which a call replaced).
    const [before, ...others] = signedBy(previous!);
    expect(others).toEqual([]);
    if (shown.length === 1) expect(before).toBe(hook.secret);
    else expect(shown.filter((secret) => secret !== current)).toContain(before);
  });

  it.each([
    [{ grace_seconds: -1 }, "grace_seconds"],
    [{ grace_seconds: 604_801 }, "grace_seconds"],
    [{ grace_seconds: 1.5 }, "grace_seconds"],
    [{ grace: 10 }, "grace"],
    ["[]", "JSON object"],
  ])("400 for %j, naming %s; the secret unchanged", async (body, field) => {
    const token = (await freshAccount()).token;
    const hook = await createWebhook(token, { url: hookUrl() });
    const before = await rowOf(hook.id);
    const { detail } = await expectJson(await call("POST", `/webhooks/${hook.id}/rotate-secret`, { token, body }), 400);
    expect(detail).toContain(field);
    expect(await rowOf(hook.id)).toEqual(before);
  });
});
