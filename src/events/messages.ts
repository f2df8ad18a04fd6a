import { z } from "zod";

/**
 * What travels through WEBHOOK_QUEUE, validated by the consumer like any other input:
 * - "event": one catalogue change, fanned out by the consumer to every matching webhook;
 * - "delivery": one event for one webhook, sent (and retried) on its own.
 */

/**
 * The event as receivers get it (`{type, timestamp, data}`), plus its id (`webhook-id`, also
 * `data.event_id`). The queue carries `data` as it was built; its shapes are src/events/schema.ts.
 */
const webhookEvent = z.object({
  id: z.string().regex(/^evt_[0-9a-f]{32}$/),
  type: z.string().min(1),
  timestamp: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export type WebhookEvent = z.infer<typeof webhookEvent>;

const minorUnits = z.number().int().nonnegative();

const eventMessage = z.object({
  kind: z.literal("event"),
  event: webhookEvent,
  /**
   * For `min_change_pct`: a price change in the offer's minor units. Absent for stock events; null
   * when the change cannot be measured (the currency changed), which every threshold lets through.
   */
  price_change: z.object({ old_minor: minorUnits, new_minor: minorUnits }).nullable().optional(),
  /**
   * Set for a change to this account's sandbox (POST /test/observations, environment `test`): it reaches that account's
   * test webhooks and test keys' streams only. Absent: a live catalogue event.
   */
  sandbox_account_id: z.string().min(1).optional(),
});
export type EventMessage = z.infer<typeof eventMessage>;

const deliveryMessage = z.object({
  kind: z.literal("delivery"),
  webhook_id: z.string().min(1),
  event: webhookEvent,
  /** Attempts made before the queue got it (the first one, right after the commit: src/webhooks/delivery/immediate.ts); absent: none. */
  attempts_before: z.int().min(0).optional(),
});
export type DeliveryMessage = z.infer<typeof deliveryMessage>;

/** Where a message goes after its last attempt (wrangler.toml); src/webhooks/delivery/dead-letters.ts consumes it. */
export const DEAD_LETTER_QUEUE = "price-data-webhooks-dlq";

export const webhookMessage = z.discriminatedUnion("kind", [eventMessage, deliveryMessage]);
export type WebhookMessage = z.infer<typeof webhookMessage>;

/** The request body: the same bytes on every attempt. */
export const deliveryBody = (event: WebhookEvent) => JSON.stringify({ type: event.type, timestamp: event.timestamp, data: event.data });

/** Cloudflare Queues takes at most 100 messages and 256 KB (bytes, not characters) per sendBatch; stay under both. */
export const SEND_BATCH_LIMIT = 100;
const SEND_BATCH_BYTES = 192 * 1024;

const encoder = new TextEncoder();
/**
 * A message's size as the queue counts it: UTF-8 bytes of its JSON (a CJK character is 3 bytes, 1 UTF-16 unit), plus
 * room for its envelope.
 */
const messageBytes = (message: WebhookMessage) => encoder.encode(JSON.stringify(message)).byteLength + 100;

/** Chunks of at most SEND_BATCH_LIMIT messages and about SEND_BATCH_BYTES, each sent with one sendBatch. */
export function chunkMessages<Message extends WebhookMessage>(messages: readonly Message[]): Message[][] {
  const chunks: Message[][] = [];
  let chunk: Message[] = [];
  let bytes = 0;
  for (const message of messages) {
    const size = messageBytes(message);
    if (chunk.length === SEND_BATCH_LIMIT || (chunk.length > 0 && bytes + size > SEND_BATCH_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(message);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** Sends every message, in chunks; `delaySecondsOf` gives a message's delay (a retry's), none by default. */
export async function sendAll<Message extends WebhookMessage>(
  queue: Queue<WebhookMessage>,
  messages: readonly Message[],
  delaySecondsOf: (message: Message) => number | undefined = () => undefined,
): Promise<void> {
  await Promise.all(
    chunkMessages(messages).map((chunk) =>
      queue.sendBatch(
        chunk.map((body) => {
          const delaySeconds = delaySecondsOf(body);
          return { body, contentType: "json" as const, ...(delaySeconds === undefined ? {} : { delaySeconds }) };
        }),
      ),
    ),
  );
}
