import pLimit from "p-limit";
import type { FactSources } from "../../alerts/environments.ts";
import { DEAD_LETTER_QUEUE, type DeliveryMessage, type EventMessage, type WebhookMessage, webhookMessage } from "../../events/messages.ts";
import { releaseFanOut } from "../../events/outbox.ts";
import { readConfig } from "../../platform/config.ts";
import { MAX_OPEN_CONNECTIONS } from "../../platform/connections.ts";
import type { Database } from "../../platform/db.ts";
import { logger } from "../../platform/log.ts";
import { WorkMeter } from "../../platform/metered.ts";
import { accountBudgets } from "../../rate-limit/stub.ts";
import type { WebhookRow } from "../service.ts";
import { type Attempted, attemptDelivery } from "./attempt.ts";
import { handleDeadLetters } from "./dead-letters.ts";
import type { WebhookEndpoint } from "./endpoint.ts";
import { claimAndFanOut, type FanOutSources } from "./fan-out.ts";
import { DELIVERY_QUEUES, sendDeliveries } from "./queues.ts";
import { recordAttempts, webhooksByIds } from "./rows.ts";
import { MAX_ATTEMPTS, retryDelaySeconds } from "./schedule.ts";
import { handToEndpoints } from "./stub.ts";

/**
 * The consumer of WEBHOOK_QUEUE and of the other delivery queues (DELIVERY_QUEUES), all alike. It is the Worker's
 * `queue` handler, not a route: deliveries never pass the Hono app, so they never touch a rate-limit bucket. A
 * batch's messages run concurrently:
 * events are fanned out together (one D1 query, one delivery message per matching webhook, sent in
 * chunks), and deliveries go out in parallel, at most MAX_OPEN_CONNECTIONS at a time, except those to
 * failing endpoints, which their webhooks' objects make.
 */

type Parsed<T> = { message: Message<unknown>; body: T };

const log = logger("webhook-queue");

export async function handleWebhookQueue(
  batch: MessageBatch<unknown>,
  env: Env,
  sandboxFactsFor: (work: WorkMeter) => FactSources["sandboxFacts"],
): Promise<void> {
  const config = readConfig(env);
  if (typeof config === "string") throw new Error(config); // the queue retries the whole batch
  // Every binding counts into the batch's tally, logged with it (what a delivery and a fan-out cost in docs/costs.json).
  const work = new WorkMeter();
  const db = work.database(env.DB);
  try {
    if (batch.queue === DEAD_LETTER_QUEUE) return await handleDeadLetters(db, batch);
    await handleMessages(batch, env, { db, work, secretKey: config.WEBHOOK_SECRET_KEY, sandboxFacts: sandboxFactsFor(work) });
  } finally {
    work.log(env, batch.queue === DEAD_LETTER_QUEUE ? "dead_letter_batch" : "queue_batch");
  }
}

async function handleMessages(
  batch: MessageBatch<unknown>,
  env: Env,
  { db, work, secretKey, sandboxFacts }: { db: Database; work: WorkMeter; secretKey: string; sandboxFacts: FactSources["sandboxFacts"] },
): Promise<void> {
  const events: Parsed<EventMessage>[] = [];
  const deliveries: Parsed<DeliveryMessage>[] = [];
  for (const message of batch.messages) {
    const parsed = webhookMessage.safeParse(message.body);
    if (!parsed.success) {
      log.error("invalid message dropped", { message_id: message.id, error: parsed.error.message });
      message.ack(); // retrying cannot make it valid
    } else if (parsed.data.kind === "event") {
      events.push({ message, body: parsed.data });
    } else {
      deliveries.push({ message, body: parsed.data });
    }
  }
  await Promise.all([
    events.length > 0 &&
      fanOutEvents(
        {
          db,
          alerts: work.alertsDatabase(env.ALERTS_DB),
          queues: DELIVERY_QUEUES.map((binding) => work.queue(env[binding])),
          sandboxFacts,
          budgets: accountBudgets(env.RATE_LIMIT_BUCKETS, work),
        },
        events,
      ),
    deliveries.length > 0 && deliverAll({ db, secretKey, endpoints: env.WEBHOOK_ENDPOINT, work }, deliveries),
  ]);
}

/**
 * Retry on the schedule after `attempt` (1-based, counted across the paths); after the last, `retry()` lets the queue
 * dead-letter the message.
 */
function retryLater(message: Message<unknown>, attempt: number): void {
  const delaySeconds = retryDelaySeconds(attempt);
  message.retry(delaySeconds === undefined ? {} : { delaySeconds });
}

/**
 * Fans out the events this consumer claims (src/webhooks/delivery/fan-out.ts), each delivery to its webhook's queue
 * (src/webhooks/delivery/queues.ts); an event already claimed (sent twice: relay and sweep), or in no outbox (a
 * sandbox's: its route fanned it out), is acked unsent. If the fan-out fails, the claims are given back and the
 * messages retried.
 */
async function fanOutEvents(
  sources: FanOutSources & { queues: Queue<WebhookMessage>[] },
  events: readonly Parsed<EventMessage>[],
): Promise<void> {
  const outcome = await claimAndFanOut(
    sources,
    events.map((event) => event.body),
    { inOutbox: true, send: (deliveries) => sendDeliveries(sources.queues, deliveries) },
  );
  if (outcome.status !== "failed") {
    for (const { message } of events) message.ack();
    return;
  }
  log.error("fan-out failed; retried", { error: String(outcome.error), events: events.map((event) => event.body.event.id) });
  if (outcome.claimed.length > 0)
    await releaseFanOut(sources.db, outcome.claimed).catch((release) => log.error("releasing claims failed", { error: String(release) }));
  for (const { message } of events) retryLater(message, message.attempts);
}

/**
 * A batch's queued deliveries: their webhooks read in one D1 query. A delivery to an enabled webhook whose endpoint
 * is failing (`failing_since` set) is handed to the webhook's own object (src/webhooks/delivery/endpoint.ts) with
 * the attempts it has had, and acked: it would hold one of this batch's connections for its timeout
 * while the others wait. The rest are attempted here (at most MAX_OPEN_CONNECTIONS at a time), then
 * recorded in one D1 batch; then each message is acked (delivered, 410, webhook gone) or retried. A
 * message whose first attempt was made before it was queued counts that attempt too, and is acked once
 * its last attempt is recorded as failed (the queue's own count would allow more). When D1 fails, every
 * message is retried (its attempt made again). Never throws.
 */
async function deliverAll(
  {
    db,
    secretKey,
    endpoints,
    work,
  }: { db: Database; secretKey: string; endpoints: DurableObjectNamespace<WebhookEndpoint>; work: WorkMeter },
  deliveries: readonly Parsed<DeliveryMessage>[],
): Promise<void> {
  const attemptOf = ({ message, body }: Parsed<DeliveryMessage>) => message.attempts + (body.attempts_before ?? 0);
  const fail = (error: unknown, which: readonly Parsed<DeliveryMessage>[]) => {
    for (const delivery of which) {
      log.error("delivery attempt failed before it was recorded; retried", {
        message_id: delivery.message.id,
        webhook_id: delivery.body.webhook_id,
        event_id: delivery.body.event.id,
        error: String(error),
      });
      retryLater(delivery.message, attemptOf(delivery));
    }
  };
  let known: Map<string, WebhookRow>;
  try {
    known = await webhooksByIds(
      db,
      deliveries.map((delivery) => delivery.body.webhook_id),
    );
  } catch (error) {
    return fail(error, deliveries);
  }
  // A disabled webhook's retry is not handed over (its object would send it should the webhook be enabled again
  // before its alarm ran): it stays here, where attemptDelivery answers "gone" and the message is acked unsent.
  const handsOver = (webhook: WebhookRow | undefined) => webhook?.status === "enabled" && Boolean(webhook.failingSince);
  const failing = new Map(
    deliveries
      .filter((delivery) => handsOver(known.get(delivery.body.webhook_id)))
      .map((delivery): [DeliveryMessage, Parsed<DeliveryMessage>] => [
        { ...delivery.body, attempts_before: attemptOf(delivery) - 1 },
        delivery,
      ]),
  );
  const refused = new Set(await handToEndpoints(endpoints, [...failing.keys()], work));
  for (const [handed, delivery] of failing) {
    if (refused.has(handed)) fail("its endpoint's object did not take it", [delivery]);
    else delivery.message.ack();
  }
  const made: { delivery: Parsed<DeliveryMessage>; attempted: Attempted | "gone" }[] = [];
  const handedOver = new Set(failing.values());
  await pLimit(MAX_OPEN_CONNECTIONS).map(
    deliveries.filter((delivery) => !handedOver.has(delivery)),
    async (delivery) => {
      const webhook = known.get(delivery.body.webhook_id);
      const attempted = await attemptDelivery(secretKey, { webhook, event: delivery.body.event, attempt: attemptOf(delivery) }).catch(
        (error: unknown) => fail(error, [delivery]),
      );
      if (attempted) made.push({ delivery, attempted });
    },
  );
  try {
    await recordAttempts(
      db,
      known,
      made.flatMap(({ attempted }) => (attempted === "gone" ? [] : [attempted.record])),
    );
  } catch (error) {
    return fail(
      error,
      made.map(({ delivery }) => delivery),
    );
  }
  for (const { delivery, attempted } of made.sort((a, b) => deliveries.indexOf(a.delivery) - deliveries.indexOf(b.delivery))) {
    const outcome = attempted === "gone" ? attempted : attempted.outcome;
    // A last attempt failed goes back to the queue, which dead-letters it; a final failure before the last (an MCP
    // subscription's 413) is acked, as is one that counted attempts made before it was queued.
    const last = attemptOf(delivery) >= MAX_ATTEMPTS;
    if (outcome === "retrying" || (outcome === "failed" && delivery.body.attempts_before === undefined && last))
      retryLater(delivery.message, attemptOf(delivery));
    else delivery.message.ack();
  }
}
