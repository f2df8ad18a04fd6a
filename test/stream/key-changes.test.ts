import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EventMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import type { StreamHub } from "../../src/stream/hub.ts";
import { hubOf, keyStreamsChanged, retryStreamPushes } from "../../src/stream/stub.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { openStream, readFrames } from "../helpers/stream-frames.ts";
import { testEvent } from "../helpers/webhooks.ts";

/**
 * A key's change and its streams (issue 47, finding 8): a publish that arrives while the hub asks the key's object about
 * a change waits for the answer, and never reaches a stream the change ends; a change the hub could not be told is
 * noted and pushed again by the cron, not only logged.
 */

afterEach(() => vi.restoreAllMocks());

let skus = 0;
const newSku = () => `KEY-CHANGE-${Date.now()}-${++skus}`;

const priceChange = (sku: string): EventMessage => ({
  kind: "event",
  event: testEvent("price.changed", {
    product_id: "prd_key_change",
    sku,
    competitor_id: "cmp_key_change",
    currency: "USD",
    old_price: "10.00",
    new_price: "9.00",
    observed_at: new Date().toISOString(),
  }),
  price_change: { old_minor: 1000, new_minor: 900 },
});

const noWork = () => new WorkMeter().counts();

describe("a key's change and its open streams", () => {
  it("a publish that comes while the hub asks about a narrowed key waits, and the stream it ends never gets it", async () => {
    const { sub, keyId, key } = await freshAccount();
    const sku = newSku();
    const stream = readFrames(await openStream(key, `?skus=${sku}`));
    try {
      await stream.until(": connected");
      await runInDurableObject(hubOf(env, sub), async (hub: StreamHub) => {
        // The key's object answers only when the test lets it: meanwhile the publish arrives.
        let answer!: () => void;
        const answered = new Promise<void>((resolve) => (answer = resolve));
        const hubEnv = (hub as unknown as { env: Env }).env;
        const keyObjects = {
          idFromName: (name: string) => hubEnv.API_KEY_OBJECTS.idFromName(name),
          get: () => ({ stillAdmits: () => answered.then(() => ({ admits: false, work: noWork() })) }),
        };
        (hub as unknown as { env: Env }).env = { ...hubEnv, API_KEY_OBJECTS: keyObjects } as unknown as Env;
        try {
          const change = hub.keyChanged({ keyId, active: true, expiresAt: null });
          const publish = hub.publish([priceChange(sku)]);
          await new Promise((resolve) => setTimeout(resolve, 200));
          expect(stream.sentIds()).toEqual([]);
          answer();
          await Promise.all([change, publish]);
        } finally {
          (hub as unknown as { env: Env }).env = hubEnv;
        }
      });
      await stream.until("no longer admits this stream");
      await stream.ended;
      expect(stream.sentIds()).toEqual([]);
    } finally {
      await stream.close();
    }
  });

  it("a change its hub could not be told is noted in D1, and the cron's retry ends the key's streams", async () => {
    const { sub, keyId, key } = await freshAccount();
    const stream = readFrames(await openStream(key, `?skus=${newSku()}`));
    try {
      await stream.until(": connected");
      const unreachable = {
        idFromName: (name: string) => env.STREAM_HUB.idFromName(name),
        get: () => ({ keyChanged: () => Promise.reject(new Error("injected: the hub is unreachable")) }),
      };
      const answer = await keyStreamsChanged(
        { DB: env.DB, STREAM_HUB: unreachable as unknown as Env["STREAM_HUB"] },
        {
          status: "revoked",
          keyId,
          accountId: sub,
        },
      );
      expect(answer.work.d1Statements).toBe(1); // the note, counted as the change's work
      const notes = () =>
        database(env.DB).$client.prepare("SELECT key_id, active FROM unreached_stream_pushes WHERE key_id = ?").bind(keyId).all();
      expect((await notes()).results).toEqual([{ key_id: keyId, active: 0 }]);

      expect(await retryStreamPushes(database(env.DB), env, new WorkMeter())).toBeGreaterThanOrEqual(1);
      await stream.until("no longer admits this stream");
      expect((await notes()).results).toEqual([]);
    } finally {
      await stream.close();
    }
  });
});
