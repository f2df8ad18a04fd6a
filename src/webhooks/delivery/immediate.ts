import pLimit from "p-limit";
import { type DeliveryMessage, type EventMessage, sendAll, type WebhookMessage } from "../../events/messages.ts";
import { claimForFanOut, markFannedOut, relayEvents, requeueEvents } from "../../events/outbox.ts";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import type { Database } from "../../platform/db.ts";
import { logger } from "../../platform/log.ts";
import { type Attempted, attemptDelivery } from "./attempt.ts";
import { fanOut, findWebhooks, recordAttempts } from "./deliveries.ts";
import { retryDelaySeconds } from "./schedule.ts";

/**
 * The first delivery, right after an ingestion's commit (its `waitUntil`, so the answer does not wait
 * for it): claim the events as the queue consumer would, fan them out, and POST up to
 * MAX_OPEN_CONNECTIONS deliveries at once from this invocation. Only what fails (or does not fit)
 * goes to WEBHOOK_QUEUE, which stays the path for every retry. The relay still puts the events on the
 * queue before the answer: if this never runs, or dies before its claim, the consumer fans them out
 * about a second later; a claim held by a path that died is picked up by the outbox sweep once stale.
 * The consumer acks its copy of an event this path has claimed, so when this path fails, it hands the
 * events back as unsent: relayed again now, or else by the sweep's next run.
 */

/** More deliveries than one round of connections, or a bulk ingestion, go through the queue as before. */
export const MAX_IMMEDIATE_DELIVERIES = MAX_OPEN_CONNECTIONS;
const MAX_IMMEDIATE_EVENTS = 100;

export interface ImmediateDeps {
  db: Database;
  /** Price history that left D1: new_low_days/new_high_days may look back into it. */
  archive: R2Bucket;
  queue: Queue<WebhookMessage>;
  secretKey: string;
}

const log = logger("webhook-immediate");

export async function deliverAfterCommit({ db, archive, queue, secretKey }: ImmediateDeps, events: readonly EventMessage[]): Promise<void> {
  if (events.length === 0 || events.length > MAX_IMMEDIATE_EVENTS) return;
  let claimed = new Set<string>();
  try {
    claimed = await claimForFanOut(
      db,
      events.map((message) => message.event.id),
    );
    if (claimed.size === 0) return; // the consumer got there first
    const deliveries = await fanOut(
      db,
      archive,
      events.filter((message) => claimed.has(message.event.id)),
    );
    const now = deliveries.slice(0, MAX_IMMEDIATE_DELIVERIES);
    const later: DeliveryMessage[] = deliveries.slice(MAX_IMMEDIATE_DELIVERIES);
    const failed: DeliveryMessage[] = [];
    const known = await findWebhooks(
      db,
      now.map((delivery) => delivery.webhook_id),
    );
    const made: { delivery: DeliveryMessage; attempted: Attempted }[] = [];
    await pLimit(MAX_OPEN_CONNECTIONS).map(now, async (delivery) => {
      const webhook = known.get(delivery.webhook_id);
      const attempted = await attemptDelivery(secretKey, { webhook, event: delivery.event, attempt: 1 }).catch((error: unknown) => {
        log.error("first attempt not recorded; the queue makes it", {
          webhook_id: delivery.webhook_id,
          event_id: delivery.event.id,
          error: String(error),
        });
        later.push(delivery); // nothing recorded: the queue makes this attempt again
      });
      if (attempted && attempted !== "gone") made.push({ delivery, attempted });
    });
    // One D1 batch for the attempts; if it fails, the queue makes them again (receivers drop repeats by webhook-id).
    const recorded = await recordAttempts(
      db,
      known,
      made.map(({ attempted }) => attempted.record),
    ).then(
      () => true,
      (error: unknown) => {
        log.error("recording the first attempts failed; the queue makes them again", { error: String(error) });
        return false;
      },
    );
    for (const { delivery, attempted } of made) {
      if (!recorded) later.push(delivery);
      else if (attempted.outcome === "retrying") failed.push({ ...delivery, attempts_before: 1 });
    }
    await Promise.all([
      sendAll(queue, later),
      // One batch, as every other send: a failed first attempt waits its retry delay in the queue.
      failed.length > 0
        ? queue.sendBatch(failed.map((body) => ({ body, contentType: "json", delaySeconds: retryDelaySeconds(1) })))
        : undefined,
    ]);
    await markFannedOut(db, [...claimed]);
  } catch (error) {
    // Hand the events back to the queue path: a delivery already made may then be made again (receivers drop repeats by webhook-id).
    log.error("immediate delivery failed, the queue takes over", { error: String(error), events: [...claimed] });
    if (claimed.size === 0) return;
    await requeueEvents(db, [...claimed])
      .then(() =>
        relayEvents(
          db,
          queue,
          events.filter((message) => claimed.has(message.event.id)),
        ),
      )
      .catch((again: unknown) => log.error("handing back failed, the claims lapse to the outbox sweep", { error: String(again) }));
  }
}
