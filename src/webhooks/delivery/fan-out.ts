import type { FactSources } from "../../alerts/environments.ts";
import type { DeliveryMessage, EventMessage } from "../../events/messages.ts";
import { claimForFanOut, markFannedOut } from "../../events/outbox.ts";
import type { AccountBudgets } from "../../rate-limit/stub.ts";
import type { DeliveriesQueuedView } from "../schema.ts";
import { withinDeliveryBudgets } from "./budgets.ts";
import { fanOutWithSubscriptions } from "./rows.ts";

/**
 * Claim → fan out → mark, the one sequence both fan-out paths run: the first delivery right after a commit
 * (src/webhooks/delivery/immediate.ts) and the queue's consumer (src/webhooks/delivery/consumer.ts). Each event is claimed
 * in the outbox first (src/events/outbox.ts), so of two paths given the same event only one fans it out; the
 * deliveries the accounts' budgets allow (src/webhooks/delivery/budgets.ts) are handed to `send`; then the claims are
 * marked done. Events in no outbox (a sandbox's, `inOutbox` false) are neither claimed nor marked. What to do when
 * it fails differs by path (hand back to the queue, or retry the message), so a failure is returned with what was claimed.
 */

export type FanOutSources = FactSources & { budgets: AccountBudgets };

export type FanOutOutcome =
  | { status: "sent"; byAccount: Map<string, DeliveriesQueuedView> }
  /** Another path claimed every event first. */
  | { status: "claimed-elsewhere" }
  | { status: "failed"; error: unknown; claimed: string[] };

export async function claimAndFanOut(
  sources: FanOutSources,
  events: readonly EventMessage[],
  { inOutbox, send }: { inOutbox: boolean; send: (deliveries: DeliveryMessage[]) => Promise<void> },
): Promise<FanOutOutcome> {
  const { db, budgets } = sources;
  let claimed: string[] = [];
  try {
    const ids = [...new Set(events.map((message) => message.event.id))];
    claimed = inOutbox ? [...(await claimForFanOut(db, ids))] : ids;
    if (claimed.length === 0) return { status: "claimed-elsewhere" };
    const mine = new Set(claimed);
    const fresh = [...new Map(events.map((message) => [message.event.id, message])).values()].filter((message) =>
      mine.has(message.event.id),
    );
    const { admitted, byAccount } = await withinDeliveryBudgets({ budgets, db }, fresh, await fanOutWithSubscriptions(sources, fresh));
    await send(admitted);
    if (inOutbox) await markFannedOut(db, claimed);
    return { status: "sent", byAccount };
  } catch (error) {
    return { status: "failed", error, claimed };
  }
}
