import pLimit from "p-limit";
import type { DeliveryMessage } from "../../events/messages.ts";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import { logger } from "../../platform/log.ts";
import type { WorkMeter } from "../../platform/metered.ts";
import type { WebhookEndpoint } from "./endpoint.ts";

/** The way to the WebhookEndpoint objects (src/webhooks/delivery/endpoint.ts), apart from the class so the app imports no object. */

const log = logger("webhook-endpoint");

/**
 * Hands deliveries to their webhooks' objects: one call per webhook, at most MAX_OPEN_CONNECTIONS at a time, each
 * returning once the object has stored them (counted into `work`). Returns the deliveries whose object
 * could not take them.
 */
export async function handToEndpoints(
  endpoints: DurableObjectNamespace<WebhookEndpoint>,
  deliveries: readonly DeliveryMessage[],
  work: WorkMeter,
): Promise<DeliveryMessage[]> {
  const byWebhook = new Map<string, DeliveryMessage[]>();
  for (const delivery of deliveries) byWebhook.set(delivery.webhook_id, [...(byWebhook.get(delivery.webhook_id) ?? []), delivery]);
  const refused: DeliveryMessage[] = [];
  await pLimit(MAX_OPEN_CONNECTIONS).map([...byWebhook], async ([webhookId, messages]) => {
    await work.called(endpoints.get(endpoints.idFromName(webhookId)).accept(messages)).catch((error: unknown) => {
      log.error("hand-off to the endpoint's object failed", { webhook_id: webhookId, error: String(error) });
      refused.push(...messages);
    });
  });
  return refused;
}
