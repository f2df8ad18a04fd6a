import { buildApp } from "./app.ts";
import { sweepCatalogue } from "./catalogue/client.ts";
import { sweepOutbox } from "./events/outbox.ts";
import { database } from "./platform/db.ts";
import { handleWebhookQueue } from "./webhooks/consumer.ts";

export { CatalogueBuilder } from "./catalogue/builder.ts";
export { RateLimiter } from "./rate-limit/rate-limiter.ts";

const app = buildApp();

export default {
  fetch: app.fetch,
  /** WEBHOOK_QUEUE's consumer: fan-out and signed deliveries (never through the app or its rate limits); also its dead-letter queue. */
  queue: handleWebhookQueue,
  /** The cron trigger (wrangler.toml, once a minute): one named sweep a line. */
  async scheduled(_controller, env) {
    // Independent: one failing must not hold back the other; a failure still fails the invocation (and is logged).
    const sweeps = await Promise.allSettled([sweepOutbox(database(env.DB), env.WEBHOOK_QUEUE), sweepCatalogue(env)]);
    for (const sweep of sweeps) if (sweep.status === "rejected") throw sweep.reason;
  },
} satisfies ExportedHandler<Env>;
