import type { FactSources } from "../../alerts/environments.ts";
import { type DeliveryMessage, type EventMessage, sendAll, type WebhookMessage } from "../../events/messages.ts";
import { relayEvents, requeueEvents } from "../../events/outbox.ts";
import type { Database } from "../../platform/db.ts";
import { logger } from "../../platform/log.ts";
import type { WorkMeter } from "../../platform/metered.ts";
import type { AccountBudgets } from "../../rate-limit/stub.ts";
import type { DeliveriesQueuedView } from "../schema.ts";
import type { WebhookEndpoint } from "./endpoint.ts";
import { claimAndFanOut } from "./fan-out.ts";
import { handToEndpoints } from "./stub.ts";

/**
 * The first delivery, right after an ingestion's commit (its `waitUntil`, so the answer does not wait
 * for it; beside the event stream's publish, src/pipeline/after-commit.ts): claim the events as the queue consumer
 * would, fan them out, and hand each webhook's deliveries to its own object (src/webhooks/delivery/endpoint.ts), which
 * makes them at once. This invocation makes
 * no POST itself: it cannot tell which endpoints hang, and 6 connections shared among them would make a
 * healthy endpoint wait behind a hanging one. What an object cannot take goes to WEBHOOK_QUEUE, which stays
 * the path for every retry. The relay still puts the events on the queue before the answer: if this never
 * runs, or dies before its claim, the consumer fans them out about a second later; a claim held by a path
 * that died is picked up by the outbox sweep once its lease has passed (src/events/outbox.ts).
 * The consumer acks its copy of an event this path has claimed, so when this path fails, it hands the
 * events back as unsent: relayed again now, or else by the sweep's next run.
 * A sandbox's events are in no outbox (they live in the account's object: src/sandbox/object.ts): this path, which its
 * route waits for, is their one fan-out, claims nothing and can say what the account's test-delivery budget held back.
 * Should it fail, their deliveries are not made; the events stay in the sandbox's feed, and a replay sends them.
 */

/** A bulk ingestion goes through the queue as before. */
const MAX_IMMEDIATE_EVENTS = 100;

export interface FirstDeliveryServices {
  db: Database;
  /** The alert windows' own database (ALERTS_DB), which the fan-out's alert rules read. */
  alerts: Database;
  queue: Queue<WebhookMessage>;
  endpoints: DurableObjectNamespace<WebhookEndpoint>;
  /** A sandbox event's alert rules decide on its account's sandbox (src/sandbox/facts.ts). */
  sandboxFacts: FactSources["sandboxFacts"];
  /** The ingestion's tally, which its calls to the endpoints' objects count into. */
  work: WorkMeter;
  /** The accounts' budgets: a sandbox's deliveries count in its account's test deliveries, a subscription's in its account's. */
  budgets: AccountBudgets;
}

const log = logger("webhook-immediate");

/**
 * Fans the events out and hands their deliveries over; returns what each sandbox account's test-delivery budget let
 * through, or undefined when the queue's path fans them out instead. `inOutbox` false: a sandbox's events, fanned out
 * here alone.
 */
export async function deliverAfterCommit(
  { db, alerts, queue, endpoints, sandboxFacts, work, budgets }: FirstDeliveryServices,
  events: readonly EventMessage[],
  { inOutbox = true } = {},
): Promise<Map<string, DeliveriesQueuedView> | undefined> {
  // A sandbox's ingestion is bounded by its own size cap (src/sandbox/schema.ts).
  if (events.length === 0) return new Map();
  if (inOutbox && events.length > MAX_IMMEDIATE_EVENTS) return undefined;
  const sources = { db, alerts, budgets, sandboxFacts };
  const send = async (deliveries: DeliveryMessage[]) => sendAll(queue, await handToEndpoints(endpoints, deliveries, work));
  const outcome = await claimAndFanOut(sources, events, { inOutbox, send });
  if (outcome.status === "sent") return outcome.byAccount;
  if (outcome.status === "claimed-elsewhere") return undefined; // the consumer got there first
  const { error, claimed } = outcome;
  if (!inOutbox) {
    log.error("a sandbox's first delivery failed; its events stay in its feed for a replay", { error: String(error), events: claimed });
    return undefined;
  }
  // Hand the events back to the queue path: a delivery already handed over may then be made again (receivers drop repeats by webhook-id).
  log.error("immediate delivery failed, the queue takes over", { error: String(error), events: claimed });
  if (claimed.length === 0) return undefined;
  await requeueEvents(db, claimed)
    .then(() =>
      relayEvents(
        db,
        queue,
        events.filter((message) => claimed.includes(message.event.id)),
      ),
    )
    .catch((again: unknown) => log.error("handing back failed, the claims lapse to the outbox sweep", { error: String(again) }));
  return undefined;
}
