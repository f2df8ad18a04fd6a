import type { DeliveryMessage, EventMessage } from "../../events/messages.ts";
import type { Database } from "../../platform/db.ts";
import { logger } from "../../platform/log.ts";
import { type AccountBudget, type BudgetGrant, budgetLabel, NOTHING_TAKEN } from "../../rate-limit/account-budgets.ts";
import type { AccountBudgets } from "../../rate-limit/stub.ts";
import type { DeliveriesQueuedView } from "../schema.ts";
import { type GapChanges, gapChanges, settleSubscriptions, withPendingGaps } from "./mcp-gaps.ts";
import { isTermination } from "./mcp-occurrence.ts";
import type { FannedOut } from "./rows.ts";

/**
 * Deliveries an account's budgets allow (src/rate-limit/account-budgets.ts, docs/webhooks.md "Per-account budgets"):
 * test deliveries at the fan-out of sandbox events, subscription deliveries at the fan-out of live events to MCP
 * subscriptions, replayed deliveries at the replay. Past a budget a delivery is held back: not made, now or later; its
 * event stays in the feed, and a replay (a subscription: events/poll, or a subscribe from its cursor) sends it again.
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
 * The fan-out's deliveries that may be made, by the budget each counts in: a sandbox event's in its account's test
 * deliveries; a live event's to an MCP subscription in the subscription's account's subscription deliveries (with its
 * pending `gap` first, src/webhooks/delivery/mcp-gaps.ts); the rest (live events to webhooks, a subscription's `terminated`, once)
 * in none. Each account's budget is taken in its own object, all at once, as much as there is room for, in the
 * fan-out's order. Then what that means for the subscriptions is written (one D1 batch, when anything is); a
 * `terminated` goes only where this batch disabled the subscription. Returns
 * the deliveries to make, and what each account's test-delivery budget met.
 */
export async function withinDeliveryBudgets(
  { budgets, db }: { budgets: AccountBudgets; db: Database },
  events: readonly EventMessage[],
  { deliveries, subscriptions, terminated }: FannedOut,
): Promise<{ admitted: DeliveryMessage[]; byAccount: Map<string, DeliveriesQueuedView> }> {
  const sandboxOf = new Map(
    events.flatMap((message) => (message.sandbox_account_id ? [[message.event.id, message.sandbox_account_id]] : [])),
  );
  const groups = new Map<string, { accountId: string; budget: AccountBudget; theirs: DeliveryMessage[] }>();
  const groupOf = (accountId: string, budget: AccountBudget) => {
    const name = `${budget}:${accountId}`;
    if (!groups.has(name)) groups.set(name, { accountId, budget, theirs: [] });
    return groups.get(name)!.theirs;
  };
  // Every sandbox account of the batch is answered, with none to make as with many.
  for (const accountId of sandboxOf.values()) groupOf(accountId, "test-deliveries");
  const admitted: DeliveryMessage[] = [];
  for (const delivery of deliveries) {
    const sandbox = sandboxOf.get(delivery.event.id);
    const subscription = subscriptions.get(delivery.webhook_id);
    if (sandbox !== undefined) groupOf(sandbox, "test-deliveries").push(delivery);
    else if (subscription && !isTermination(delivery.event)) groupOf(subscription.accountId, "subscription-deliveries").push(delivery);
    else admitted.push(delivery);
  }
  const outcomes = new Map<string, DeliveriesQueuedView>();
  const gaps: GapChanges = { sent: [], skipped: [] };
  await Promise.all(
    [...groups.values()].map(async ({ accountId, budget, theirs }) => {
      const asked = withPendingGaps(subscriptions, theirs);
      const grant = await takeDeliveries(budgets, accountId, budget, asked.length);
      const made = asked.slice(0, grant.granted);
      admitted.push(...made);
      const changes = gapChanges(subscriptions, made, asked.slice(grant.granted));
      gaps.sent.push(...changes.sent);
      gaps.skipped.push(...changes.skipped);
      const outcome = deliveriesQueued(budget, asked.length, grant);
      if (outcome.held_back > 0) log.warn("deliveries held back by the account's budget", { account_id: accountId, ...outcome });
      if (budget === "test-deliveries") outcomes.set(accountId, outcome);
    }),
  );
  const disabled = await settleSubscriptions(db, gaps, terminated);
  const once = (delivery: DeliveryMessage) => !isTermination(delivery.event) || disabled.has(delivery.webhook_id);
  return { admitted: admitted.filter(once), byAccount: outcomes };
}
