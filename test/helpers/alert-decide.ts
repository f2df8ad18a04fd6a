import { env } from "cloudflare:workers";
import { asc, eq, inArray, like } from "drizzle-orm";
import { expect, vi } from "vitest";
import type { DeliveryMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import { events, webhooks } from "../../src/platform/tables.ts";
import { DAY_MS } from "../../src/platform/time.ts";
import { freshAccount } from "./accounts.ts";
import { call, expectJson } from "./http.ts";
import { settled } from "./settle.ts";
import { hookUrl, type Receiver } from "./webhook-receiver.ts";
import { createWebhook, endpointSettled, ingest, type ObservationInput } from "./webhooks.ts";

/** Alert rules decided by the fan-out and by replay over the same ingested steps (test/alerts/). */

const db = () => database(env.DB);
let cases = 0;

export interface Step extends Partial<ObservationInput> {
  price: string;
  /** When observed, in days before now (default: the step's order, seconds apart, ending now). */
  daysAgo?: number;
}

/**
 * Ingests `steps` for one new product (in order), then asks the fan-out and the replay which of the
 * resulting events a webhook with `filters` (and `body`) takes; both answers must be the same.
 * Returns, per stored event in order, whether it was sent.
 */
export async function decide(receiver: Receiver, filters: unknown, steps: Step[], body: Record<string, unknown> = {}): Promise<boolean[]> {
  const sku = `ALERT-${Date.now()}-${++cases}-ü`;
  const token = (await freshAccount()).token;
  const hook = await createWebhook(token, { url: hookUrl("alert"), filters, ...body });
  const sends = vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockResolvedValue({} as QueueSendBatchResponse);
  try {
    const since = new Date(Date.now() - 400 * DAY_MS).toISOString();
    const now = Date.now();
    for (const [i, { daysAgo, ...step }] of steps.entries()) {
      const observedAt = new Date(daysAgo === undefined ? now - (steps.length - i) * 1000 : now - daysAgo * DAY_MS).toISOString();
      await ingest([{ sku, brand: "Acme", category: "Headphones", ...step, observed_at: observedAt }]);
    }
    const rows = await db()
      .select()
      .from(events)
      .where(like(events.payload, `%${JSON.stringify(sku).slice(1, -1)}%`))
      .orderBy(asc(events.seq))
      .all();
    const ids = rows.map((row) => row.id);
    const queued = () =>
      sends.mock.calls
        .flatMap(([batch]) => [...batch].map((m) => m.body as DeliveryMessage))
        .filter((m) => m.kind === "delivery" && m.webhook_id === hook.id && ids.includes(m.event.id))
        .map((m) => m.event.id); // replay also sends the other cases' events this webhook takes

    // The fan-out: right after each commit (src/webhooks/delivery/immediate.ts), which hands the deliveries to the webhook's object.
    await settled(
      async () =>
        expect((await db().select().from(events).where(inArray(events.id, ids)).all()).every((row) => row.fannedOutAt !== null)).toBe(true),
      20,
    );
    await endpointSettled(hook.id);
    const posted = receiver.to(hook.url).map((request) => request.headers["webhook-id"]!);
    const fannedOut = ids.filter((id) => posted.includes(id) || queued().includes(id));
    sends.mockClear();
    expect(await expectJson(await call("POST", `/webhooks/${hook.id}/replay`, { token, body: { since } }), 202)).toMatchObject({
      queued: expect.any(Number),
      held_back: 0,
    });
    const replayed = queued();
    expect(replayed, "replay decides as the fan-out does").toEqual(fannedOut);
    await db().update(webhooks).set({ status: "disabled" }).where(eq(webhooks.id, hook.id)); // later cases' events are not its
    return rows.map((row) => fannedOut.includes(row.id));
  } finally {
    sends.mockRestore();
  }
}

export const prices = (...values: string[]): Step[] => values.map((price) => ({ price }));
