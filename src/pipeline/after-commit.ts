import type { EventMessage } from "../events/messages.ts";
import type { AfterCommitOptions, RequestServices } from "../http/app-env.ts";
import { accountBudgets } from "../rate-limit/stub.ts";
import { publishToStreams } from "../stream/publish.ts";
import { deliverAfterCommit } from "../webhooks/delivery/immediate.ts";
import type { DeliveriesQueuedView } from "../webhooks/schema.ts";

/**
 * The one step after an ingestion's commit (the catalogue's, a sandbox's): after the answer, its events are published to
 * the open streams' hubs (src/stream/publish.ts) and fanned out to their first delivery (src/webhooks/delivery/immediate.ts).
 * The request's services carry it (src/pipeline/services.ts), so the ingestion that commits the events names no delivery
 * mechanism. Returns the delivery's outcome, which a sandbox's route waits for (its events are in no outbox: `inOutbox`
 * false) to say what the test-delivery budget held back.
 */
export function publishCommitted(
  env: Env,
  {
    db,
    alerts,
    queue,
    work,
    afterAnswer,
    sandboxFacts,
  }: Pick<RequestServices, "db" | "alerts" | "queue" | "work" | "afterAnswer" | "sandboxFacts">,
  events: readonly EventMessage[],
  { inOutbox = true }: AfterCommitOptions = {},
): Promise<Map<string, DeliveriesQueuedView> | undefined> {
  const budgets = accountBudgets(env.RATE_LIMIT_BUCKETS, work);
  const delivered = deliverAfterCommit({ db, alerts, queue, endpoints: env.WEBHOOK_ENDPOINT, sandboxFacts, work, budgets }, events, {
    inOutbox,
  });
  afterAnswer(Promise.all([publishToStreams(env, events, work), delivered]));
  return delivered;
}
