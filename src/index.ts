import { buildApp } from "./app.ts";
import { handleWebhookQueue } from "./webhooks/consumer.ts";

export { CatalogueBuilder } from "./catalogue/builder.ts";
export { RateLimiter } from "./rate-limit/rate-limiter.ts";

const app = buildApp();

export default {
  fetch: app.fetch,
  /** WEBHOOK_QUEUE's consumer: fan-out and signed deliveries (never through the app or its rate limits). */
  queue: handleWebhookQueue,
} satisfies ExportedHandler<Env>;
