import type { Context } from "hono";
import type { EventMessage } from "../events/messages.ts";
import type { AppEnv } from "../http/app-env.ts";
import { accountBudgets } from "../rate-limit/stub.ts";
import { publishToStreams } from "../stream/publish.ts";
import { deliverAfterCommit } from "../webhooks/delivery/immediate.ts";
import type { DeliveriesQueuedView } from "../webhooks/schema.ts";

/**
 * What an ingestion's route (the catalogue's, a sandbox's) does with its committed events: after the answer, in one
 * step, the stream hubs' publish and the webhooks' first delivery. Returns the delivery's outcome, which a sandbox's
 * route waits for (its events are in no outbox: `inOutbox` false) to say what the test-delivery budget held back.
 */
export function afterCommitOf(
  c: Context<AppEnv>,
  { inOutbox = true } = {},
): (events: readonly EventMessage[]) => Promise<Map<string, DeliveriesQueuedView> | undefined> {
  const { db, alerts, queue, work, afterAnswer } = c.var.services;
  const budgets = accountBudgets(c.env.RATE_LIMIT_BUCKETS, work);
  return (events) => {
    const delivered = deliverAfterCommit(
      { db, alerts, queue, endpoints: c.env.WEBHOOK_ENDPOINT, sandboxes: c.env.SANDBOX, work, budgets },
      events,
      { inOutbox },
    );
    afterAnswer(Promise.all([publishToStreams(c.env, events, work), delivered]));
    return delivered;
  };
}
