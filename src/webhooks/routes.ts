import { openApiAppOf } from "../http/openapi.ts";
import { registerCreateWebhook } from "./routes/create-webhook.ts";
import { registerDeleteWebhook } from "./routes/delete-webhook.ts";
import { registerGetWebhook } from "./routes/get-webhook.ts";
import { registerListWebhookDeliveries } from "./routes/list-webhook-deliveries.ts";
import { registerListWebhooks } from "./routes/list-webhooks.ts";
import { registerReplayWebhookEvents } from "./routes/replay-webhook-events.ts";
import { registerRotateWebhookSecret } from "./routes/rotate-webhook-secret.ts";
import { registerTestWebhook } from "./routes/test-webhook.ts";
import { registerUpdateWebhook } from "./routes/update-webhook.ts";

/**
 * /webhooks (account login). Webhook ids of another account are 404, as if they did not exist. Each operation is
 * declared beside its handler in its own file under routes/; they are registered here in the document's order.
 */
export const webhookRoutes = openApiAppOf(
  registerCreateWebhook,
  registerListWebhooks,
  registerGetWebhook,
  registerDeleteWebhook,
  registerTestWebhook,
  registerUpdateWebhook,
  registerRotateWebhookSecret,
  registerReplayWebhookEvents,
  registerListWebhookDeliveries,
);
