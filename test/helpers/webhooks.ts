import { createExecutionContext, createMessageBatch, getQueueResult, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import type { DeliveryMessage, EventMessage, WebhookEvent, WebhookMessage } from "../../src/events/messages.ts";
import { outboxRows } from "../../src/events/outbox-rows.ts";
import worker from "../../src/index.ts";
import { database } from "../../src/platform/db.ts";
import { newId } from "../../src/platform/ids.ts";
import { events } from "../../src/platform/tables.ts";
import { DELIVERY_QUEUES } from "../../src/webhooks/delivery/queues.ts";
import { call, expectJson } from "./http.ts";
import { adminToken } from "./tokens.ts";

export const QUEUE_NAME = "price-data-webhooks";

/**
 * sendBatch of every queue a fan-out spreads its deliveries over (DELIVERY_QUEUES, WEBHOOK_QUEUE first: events and
 * retries go there), spied on together; `sent` is every message any of them was given.
 */
export function spyOnDeliveryQueues() {
  const spies = DELIVERY_QUEUES.map((binding) => vi.spyOn(env[binding], "sendBatch"));
  return {
    spies,
    sent: () => spies.flatMap((spy) => spy.mock.calls.flatMap(([batch]) => [...batch])) as MessageSendRequest<WebhookMessage>[],
    restore: () => {
      for (const spy of spies) spy.mockRestore();
    },
  };
}

export async function createWebhook(token: string, body: Record<string, unknown>) {
  return expectJson(await call("POST", "/webhooks", { token, body }), 201);
}

export function testEvent(type = "price.changed", data: Record<string, unknown> = {}): WebhookEvent {
  const id = newId("evt");
  return { id, type, timestamp: new Date().toISOString(), data: { event_id: id, ...data } };
}

export const deliveryTo = (webhookId: string, event: WebhookEvent = testEvent()): DeliveryMessage => ({
  kind: "delivery",
  webhook_id: webhookId,
  event,
});

/** Puts event messages in the outbox, as an ingestion does: the consumer fans out only events it finds (and claims) there. */
export async function storeEvents(messages: readonly EventMessage[]): Promise<void> {
  await database(env.DB).insert(events).values(outboxRows(messages, new Date().toISOString()));
}

let messages = 0;

/**
 * Runs the worker's queue handler on a batch, as the queue would deliver it; returns what it acked
 * and retried. getQueueResult() does not report a retry's delay, so `retryMessages` comes from
 * watching each message's retry() (what the queue would be asked).
 */
export async function runQueue(bodies: readonly (WebhookMessage | unknown)[], attempts = 1) {
  const batch = createMessageBatch(
    QUEUE_NAME,
    bodies.map((body) => ({ id: `msg-${++messages}`, timestamp: new Date(), attempts, body })),
  );
  const retryMessages: { msgId: string; delaySeconds: number | undefined }[] = [];
  for (const message of batch.messages) {
    const retry = message.retry.bind(message);
    message.retry = (options?: QueueRetryOptions) => {
      retryMessages.push({ msgId: message.id, delaySeconds: options?.delaySeconds });
      retry(options);
    };
  }
  const ctx = createExecutionContext();
  const queue: ExportedHandlerQueueHandler<typeof env> = worker.queue;
  await queue(batch, env, ctx);
  const result = await getQueueResult(batch, ctx);
  expect(result.retryMessages.map((r) => r.msgId)).toEqual(retryMessages.map((r) => r.msgId));
  return { ...result, retryMessages, ids: batch.messages.map((m) => m.id) };
}

const endpointOf = (webhookId: string) => env.WEBHOOK_ENDPOINT.get(env.WEBHOOK_ENDPOINT.idFromName(webhookId));

/**
 * Runs a webhook's object's alarm now, making what it holds. Under a fake clock the alarm it set for "now" is at the
 * fake time, which the runtime's real clock would reach only then.
 */
export async function runEndpointNow(webhookId: string): Promise<void> {
  await runDurableObjectAlarm(endpointOf(webhookId));
}

/** How many deliveries a webhook's object (src/webhooks/delivery/endpoint.ts) holds, not yet made. */
export const pendingAtEndpoint = (webhookId: string) =>
  runInDurableObject(
    endpointOf(webhookId),
    (_, state) => state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM pending").one().n,
  );

/** Waits until a webhook's object has made, and recorded, every delivery handed to it. */
export async function endpointSettled(webhookId: string, timeout = 5_000): Promise<void> {
  await vi.waitFor(async () => expect(await pendingAtEndpoint(webhookId)).toBe(0), { timeout, interval: 20 });
}

// ---- Observations -----------------------------------------------------------------------------------

export interface ObservationInput {
  sku: string;
  name?: string;
  brand?: string | null;
  category?: string | null;
  gtin?: string | null;
  mpn?: string | null;
  competitor?: { id: string; name: string; domain?: string | null };
  url?: string | null;
  price?: string;
  regular_price?: string | null;
  currency?: string;
  shipping_cost?: string | null;
  in_stock?: boolean;
  observed_at?: string;
  seller?: string | null;
  condition?: "new" | "used" | "refurbished";
  quantity?: string;
  unit?: string;
}

export const observation = (input: ObservationInput) => ({
  name: `Product ${input.sku}`,
  competitor: { id: "cmp_amazon", name: "Amazon", domain: "amazon.com" },
  price: "10.00",
  currency: "USD",
  in_stock: true,
  ...input,
});

export async function postObservations(observations: unknown[], token?: string) {
  return call("POST", "/admin/observations", { token: token ?? (await adminToken()), body: { observations } });
}

export async function ingest(observations: ObservationInput[]) {
  return expectJson(await postObservations(observations.map(observation)), 200);
}
