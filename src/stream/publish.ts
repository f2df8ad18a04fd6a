import pLimit from "p-limit";
import type { EventMessage } from "../events/messages.ts";
import { MAX_OPEN_CONNECTIONS } from "../platform/connections.ts";
import { logger } from "../platform/log.ts";
import type { WorkMeter } from "../platform/metered.ts";
import type { StreamHub } from "./hub.ts";
import { everyHub, hubOf } from "./stub.ts";

const log = logger("stream-publish");

/**
 * Publishes an ingestion's committed events to every stream hub (src/stream/hub.ts), which push each open stream what
 * its rule matches: one call per hub, MAX_OPEN_CONNECTIONS at a time (a sandbox's events: its account's hub alone).
 * Only catalogue events come here (an ingestion emits no other), so nothing of an account reaches a stream. A failed
 * call is made once more (a hub being replaced or overloaded); a hub that restarts closes its sockets, and their
 * clients catch up from the feed with Last-Event-ID.
 * One still unreachable after that is logged: its streams miss these events unless they end before sending a later
 * one (then the reconnect's backfill has them). Each call, and the work each hub reports (its rules' D1 and archive
 * reads, its storage rows), counts in `work`: the publishing invocation's tally.
 */
export async function publishToStreams(env: Pick<Env, "STREAM_HUB">, events: readonly EventMessage[], work: WorkMeter): Promise<void> {
  if (events.length === 0) return;
  const publish = (hub: DurableObjectStub<StreamHub>) => work.called(hub.publish(events));
  // A sandbox's events (POST /test/observations) concern their account alone, whose streams are all in its hub.
  const sandboxes = new Set(events.map((event) => event.sandbox_account_id));
  const hubs = sandboxes.has(undefined) ? everyHub(env) : [...sandboxes].map((accountId) => hubOf(env, accountId!));
  await pLimit(MAX_OPEN_CONNECTIONS).map(hubs, (hub, index) =>
    publish(hub)
      .catch(() => publish(hub))
      .catch((error: unknown) => log.error("publish to a stream hub failed twice", { hub: index, error: String(error) })),
  );
}
