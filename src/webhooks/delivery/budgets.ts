import type { DeliveryMessage, EventMessage } from "../../events/messages.ts";
import { logger } from "../../platform/log.ts";
import { type AccountBudget, type BudgetGrant, budgetLabel, NOTHING_TAKEN } from "../../rate-limit/account-budgets.ts";
import type { AccountBudgets } from "../../rate-limit/stub.ts";
import type { DeliveriesQueuedView } from "../schema.ts";

/**
 * Deliveries an account's budgets allow (src/rate-limit/account-budgets.ts, docs/webhooks.md "Per-account budgets"):
 * test deliveries at the fan-out of sandbox events, replayed deliveries at the replay. Past a budget a delivery is held
 * back: not made, now or later; its event stays in the feed, and a replay sends it again once the budget has room.
 */

const log = logger("webhook-budgets");

/** A call's answer about its deliveries: `amount` asked of `budget`, `grant` what it gave. */
export function deliveriesQueued(budget: AccountBudget, amount: number, grant: BudgetGrant): DeliveriesQueuedView {
  const heldBack = amount - grant.granted;
  return {
    queued: grant.granted,
    held_back: heldBack,
    budget: budgetLabel(budget),
    refills_at: heldBack === 0 ? null : new Date(Date.now() + grant.refillMs).toISOString(),
  };
}

/** Takes `amount` of `budget` from the account's object (none asked: no call), as much as there is room for. */
export const takeDeliveries = async (budgets: AccountBudgets, accountId: string, budget: AccountBudget, amount: number) =>
  amount === 0 ? NOTHING_TAKEN : budgets.take(accountId, budget, amount, { whole: false });

/**
 * The fan-out's deliveries that may be made: every live event's, and of each account's sandbox events' deliveries
 * those its test-delivery budget has room for (each account's in the fan-out's order); and what each account's met.
 */
export async function withinTestDeliveryBudgets(
  budgets: AccountBudgets,
  events: readonly EventMessage[],
  deliveries: readonly DeliveryMessage[],
): Promise<{ admitted: DeliveryMessage[]; byAccount: Map<string, DeliveriesQueuedView> }> {
  const sandboxOf = new Map(
    events.flatMap((message) => (message.sandbox_account_id ? [[message.event.id, message.sandbox_account_id]] : [])),
  );
  const byAccount = new Map<string, DeliveryMessage[]>([...new Set(sandboxOf.values())].map((accountId) => [accountId, []]));
  const admitted: DeliveryMessage[] = [];
  for (const delivery of deliveries) {
    const accountId = sandboxOf.get(delivery.event.id);
    if (accountId === undefined) admitted.push(delivery);
    else byAccount.get(accountId)!.push(delivery);
  }
  const outcomes = new Map<string, DeliveriesQueuedView>();
  await Promise.all(
    [...byAccount].map(async ([accountId, theirs]) => {
      const grant = await takeDeliveries(budgets, accountId, "test-deliveries", theirs.length);
      admitted.push(...theirs.slice(0, grant.granted));
      const outcome = deliveriesQueued("test-deliveries", theirs.length, grant);
      if (outcome.held_back > 0) log.warn("test deliveries held back by the account's budget", { account_id: accountId, ...outcome });
      outcomes.set(accountId, outcome);
    }),
  );
  return { admitted, byAccount: outcomes };
}
