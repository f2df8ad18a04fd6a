import { type DeliveryMessage, sendAll, type WebhookMessage } from "../../events/messages.ts";
import { fnv1a } from "../../platform/hash.ts";

/**
 * The queues a fan-out's deliveries are spread over, by webhook (wrangler.toml). A queue runs at most 250 consumers at
 * once and a consumer holds 6 connections, so the deliveries a second a queue can carry are bounded by its receivers'
 * answer time; each queue added carries as many again (docs/scale.md). Every queue is consumed the same way
 * (src/webhooks/delivery/consumer.ts); a delivery's retries stay on the queue that holds it.
 */
export const DELIVERY_QUEUES = ["WEBHOOK_QUEUE", "WEBHOOK_QUEUE_2"] as const;

/** Sends each delivery to its webhook's queue (one of `queues`, in DELIVERY_QUEUES' order), in chunks as sendAll does. */
export async function sendDeliveries(queues: readonly Queue<WebhookMessage>[], deliveries: readonly DeliveryMessage[]): Promise<void> {
  const byQueue = queues.map((): DeliveryMessage[] => []);
  for (const delivery of deliveries) byQueue[fnv1a(delivery.webhook_id) % queues.length]!.push(delivery);
  await Promise.all(byQueue.map((some, i) => sendAll(queues[i]!, some)));
}
