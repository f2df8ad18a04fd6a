import { announceExpiringKeys } from "./account-events/expiring.ts";
import { retryPlanPushes } from "./accounts/plan-pushes.ts";
import { KeyObject } from "./api-keys/object/key-object.ts";
import { keyObjectControl } from "./api-keys/object/stub.ts";
import type { KeyState } from "./api-keys/object/types.ts";
import { buildApp } from "./app.ts";
import { archiveHistory } from "./catalogue/history-archive.ts";
import { sweepSnapshot } from "./catalogue/snapshot/stub.ts";
import { archiveEvents, expireArchive } from "./events/archive.ts";
import { sweepOutbox } from "./events/outbox.ts";
import { appendScheduledExports } from "./exports/service.ts";
import { sweepLapsedSubscriptions } from "./mcp/events/service.ts";
import { WorkMeter } from "./platform/metered.ts";
import { sandboxFactsOf } from "./sandbox/facts.ts";
import { accountSandbox } from "./sandbox/stub.ts";
import { keyStreamsChanged, retryStreamPushes } from "./stream/stub.ts";
import { handleWebhookQueue } from "./webhooks/delivery/consumer.ts";
import { archiveDeliveries, DELIVERY_ARCHIVE_CRON } from "./webhooks/delivery/delivery-archive.ts";

export { LastUsedLog } from "./api-keys/object/last-used.ts";
export { CatalogueBuilder } from "./catalogue/snapshot/builder.ts";
export { ExportRunner } from "./exports/runner.ts";
export { RateLimitBucket } from "./rate-limit/bucket.ts";
export { SandboxObject } from "./sandbox/object.ts";
export { StreamHub } from "./stream/hub.ts";
export { WebhookEndpoint } from "./webhooks/delivery/endpoint.ts";

/** A key's object (src/api-keys/object/key-object.ts) whose key's changes reach the key's open event streams. */
export class ApiKeyObject extends KeyObject {
  protected keyChanged(state: KeyState) {
    return keyStreamsChanged(this.env, state);
  }
}

const app = buildApp();

export default {
  fetch: app.fetch,
  /** WEBHOOK_QUEUE's consumer: fan-out and signed deliveries (never through the app or its rate limits); also its dead-letter queue. */
  queue: (batch, env) =>
    handleWebhookQueue(batch, env, (work) => sandboxFactsOf((accountId) => accountSandbox(env.SANDBOX, work, accountId))),
  /**
   * The cron triggers (wrangler.toml, both once a minute): the delivery archive on its own, so its R2 writes
   * have an invocation's subrequests to themselves; the rest, one named sweep a line.
   */
  async scheduled(controller, env) {
    // Every binding counts into the run's tally, logged with the run (what `cron_run` costs in docs/costs.json).
    const work = new WorkMeter();
    const db = work.database(env.DB);
    const alerts = work.alertsDatabase(env.ALERTS_DB);
    const archive = work.bucket(env.ARCHIVE);
    const queue = work.queue(env.WEBHOOK_QUEUE);
    try {
      if (controller.cron === DELIVERY_ARCHIVE_CRON) {
        await archiveDeliveries(db, archive);
        return;
      }
      // Independent: one failing must not hold back another; a failure still fails the invocation (and is logged).
      // The archive's two steps share D1 and R2 but not rows (events; price history); each is bounded per run (docs/scale.md).
      const sweeps = await Promise.allSettled([
        sweepOutbox(db, queue),
        sweepSnapshot(env, work),
        archiveEvents(db, archive).then(() => expireArchive(db, archive)),
        archiveHistory(db, alerts, archive),
        announceExpiringKeys(db, queue),
        retryPlanPushes(db, keyObjectControl(env, work)),
        retryStreamPushes(db, env, work),
        sweepLapsedSubscriptions(db),
        appendScheduledExports(db, env.EXPORT_RUNNER, work),
      ]);
      for (const sweep of sweeps) if (sweep.status === "rejected") throw sweep.reason;
    } finally {
      work.log(env, controller.cron === DELIVERY_ARCHIVE_CRON ? "cron_delivery_archive" : "cron_sweeps");
    }
  },
} satisfies ExportedHandler<Env>;
