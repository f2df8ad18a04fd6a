import type { Context } from "hono";
import type { EventMessage } from "../events/messages.ts";
import type { AppEnv } from "../http/app-env.ts";
import { publishToStreams } from "../stream/publish.ts";
import { deliverAfterCommit } from "../webhooks/delivery/immediate.ts";

/**
 * What an ingestion's route (the catalogue's, a sandbox's) does with its committed events: after the answer, in one
 * step, the stream hubs' publish and the webhooks' first delivery.
 */
export function afterCommitOf(c: Context<AppEnv>): (events: readonly EventMessage[]) => void {
  const { db, queue, work, afterAnswer } = c.var.services;
  return (events) =>
    afterAnswer(
      Promise.all([
        publishToStreams(c.env, events, work),
        deliverAfterCommit({ db, queue, endpoints: c.env.WEBHOOK_ENDPOINT, work }, events),
      ]),
    );
}
