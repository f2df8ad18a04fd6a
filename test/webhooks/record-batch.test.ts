import { env } from "cloudflare:workers";
import { eq, inArray } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { D1_ROUND_TRIPS_PER_DELIVERY_BATCH } from "../../src/events/retention.ts";
import { database } from "../../src/platform/db.ts";
import { webhookDeliveries, webhooks } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { settled } from "../helpers/settle.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, deliveryTo, runQueue } from "../helpers/webhooks.ts";

/**
 * A queue batch's deliveries cost D1 a fixed number of round trips, whatever their number: the webhooks
 * read in one query, the attempts recorded in one batch (their rows in one statement, the webhooks' state in
 * a few more, only when some webhook's state changes or an attempt is to be retried). At the target load this is what keeps D1's
 * query rate under half its limit (docs/scale.md).
 */

const db = () => database(env.DB);
let receiver: Receiver;

beforeAll(() => {
  receiver = installReceiver();
});
afterEach(() => receiver.assertNoStrayRequests());

/**
 * D1 round trips while `run` runs: every statement is prepared once (drizzle and insertRows prepare per
 * call), so statements run alone are those prepared and not passed to a batch; a batch counts once.
 */
async function roundTrips(run: () => Promise<unknown>) {
  const batches: number[] = [];
  let prepared = 0;
  const batch = env.DB.batch.bind(env.DB);
  const batchSpy = vi.spyOn(env.DB, "batch").mockImplementation((statements) => {
    batches.push(statements.length);
    return batch(statements);
  });
  const prepare = env.DB.prepare.bind(env.DB);
  const prepareSpy = vi.spyOn(env.DB, "prepare").mockImplementation((query) => {
    prepared++;
    return prepare(query);
  });
  try {
    await run();
  } finally {
    batchSpy.mockRestore();
    prepareSpy.mockRestore();
  }
  const inBatches = batches.reduce((a, b) => a + b, 0);
  return { total: prepared - inBatches + batches.length, batches };
}

describe("recording a queue batch's attempts", () => {
  it(`ten successful deliveries to three webhooks: ${D1_ROUND_TRIPS_PER_DELIVERY_BATCH} D1 round trips, the record one statement`, async () => {
    const token = (await freshAccount()).token;
    const hooks = await Promise.all([0, 1, 2].map(() => createWebhook(token, { url: hookUrl() })));
    for (const hook of hooks) receiver.respond(hook.url, () => new Response("ok ✓"));
    const messages = Array.from({ length: 10 }, (_, i) => deliveryTo(hooks[i % 3]!.id));
    const cost = await roundTrips(() => runQueue(messages));
    expect(cost).toEqual({ total: D1_ROUND_TRIPS_PER_DELIVERY_BATCH, batches: [1] });
    const rows = await db()
      .select()
      .from(webhookDeliveries)
      .where(
        inArray(
          webhookDeliveries.webhookId,
          hooks.map((hook) => hook.id),
        ),
      );
    expect(rows).toHaveLength(10);
    expect(rows.every((row) => row.outcome === "delivered" && row.responseExcerpt === "ok ✓")).toBe(true);
  });

  it("failures and a 410 in one batch: still two round trips; each webhook's state as if recorded one by one, a later success clearing it", async () => {
    const token = (await freshAccount()).token;
    const [failing, recovered, gone] = await Promise.all([0, 1, 2].map(() => createWebhook(token, { url: hookUrl() })));
    receiver.respond(failing!.url, () => new Response("down", { status: 503 }));
    let first = true;
    receiver.respond(recovered!.url, () => {
      const answer = first ? new Response("down", { status: 500 }) : new Response("ok");
      first = false;
      return answer;
    });
    receiver.respond(gone!.url, () => new Response(null, { status: 410 }));
    const cost = await roundTrips(() =>
      runQueue([deliveryTo(failing!.id), deliveryTo(failing!.id), deliveryTo(recovered!.id), deliveryTo(gone!.id)]),
    );
    expect(cost.total).toBe(D1_ROUND_TRIPS_PER_DELIVERY_BATCH);
    // The rows, failing_since, the disable, the account's webhook.disabled events, and the retries of those disabled abandoned.
    expect(cost.batches).toEqual([5]);
    await runQueue([deliveryTo(recovered!.id)]); // failing: its object makes it
    const state = async (id: string) => (await db().select().from(webhooks).where(eq(webhooks.id, id)).get())!;
    await settled(async () => expect(await state(recovered!.id)).toMatchObject({ failingSince: null }));
    expect((await state(failing!.id)).failingSince).not.toBeNull();
    expect(await state(failing!.id)).toMatchObject({ status: "enabled" });
    expect(await state(recovered!.id)).toMatchObject({ status: "enabled", failingSince: null });
    expect(await state(gone!.id)).toMatchObject({ status: "disabled", disabledReason: "The endpoint answered 410 Gone." });
  });
});
