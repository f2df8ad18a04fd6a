/**
 * Verifying a delivery: the API signs per Standard Webhooks, so this wraps the `standardwebhooks`
 * library (signature over "id.timestamp.body" with the webhook's `whsec_…` secret, and a timestamp
 * no more than 5 minutes off). Pass the raw body text exactly as received, before any JSON parsing.
 *
 *   const event = await verifyWebhookRequest(process.env.PRICE_DATA_WEBHOOK_SECRET!, request);
 *   if (event.type === "price.changed") console.log(event.data.sku, event.data.old_price, "→", event.data.new_price);
 */
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import type { components } from "./schema.d.ts";

export { WebhookVerificationError };

/** An event as the document's `webhooks` describe it; `type` tells which. */
export type WebhookEvent =
  | components["schemas"]["PriceChangedEvent"]
  | components["schemas"]["StockChangedEvent"]
  | components["schemas"]["TestEvent"];

const HEADERS = ["webhook-id", "webhook-timestamp", "webhook-signature"] as const;

/**
 * The event, once its signature and timestamp check out; throws WebhookVerificationError otherwise.
 * `headers`: a Headers object, or a plain object such as Node's `req.headers` (names in any case).
 */
export function verifyWebhook(
  secret: string,
  body: string,
  headers: Headers | Record<string, string | string[] | undefined>,
): WebhookEvent {
  const get = (name: string) => {
    const value =
      headers instanceof Headers
        ? headers.get(name)
        : (headers[name] ?? Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1]);
    return (Array.isArray(value) ? value[0] : value) ?? "";
  };
  return new Webhook(secret).verify(body, Object.fromEntries(HEADERS.map((name) => [name, get(name)]))) as WebhookEvent;
}

/** verifyWebhook for a fetch-style Request (Workers, Deno, Bun, Node ≥ 18 frameworks); reads its body. */
export async function verifyWebhookRequest(secret: string, request: Request): Promise<WebhookEvent> {
  return verifyWebhook(secret, await request.text(), request.headers);
}
