import { buildApp } from "./app.ts";
import { sweepOutbox } from "./events/outbox.ts";
import { database } from "./platform/db.ts";
import { handleWebhookQueue } from "./webhooks/consumer.ts";

export { RateLimiter } from "./rate-limit/rate-limiter.ts";

const app = buildApp();

export default {
  fetch: app.fetch,
  /** WEBHOOK_QUEUE's consumer: fan-out and signed deliveries (never through the app or its rate limits); also its dead-letter queue. */
  queue: handleWebhookQueue,
  /** The cron trigger (wrangler.toml, once a minute): one named sweep a line. */
  async scheduled(_controller, env) {
    await sweepOutbox(database(env.DB), env.WEBHOOK_QUEUE);
  },
} satisfies ExportedHandler<Env>;
