import { ApiError } from "../http/errors.ts";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../platform/time.ts";

/**
 * The contract's per-account budgets (fifth wave, "Per-account budgets"): what one account can make the service write
 * and send, beyond each key's own limits. Each is a rolling window counted by the account's RateLimitBucket object
 * (src/rate-limit/bucket.ts, `account:<id>`), exactly and one call at a time. Pure: the object persists the slots.
 */
export const ACCOUNT_BUDGETS = {
  /** Observations a POST /test/observations may write into the account's sandbox. */
  "sandbox-changes": { limit: 10_000, windowMs: DAY_MS, slotMs: 15 * MINUTE_MS, per: "day" },
  /** Deliveries of sandbox events to the account's test webhooks, as their fan-out makes them. */
  "test-deliveries": { limit: 600, windowMs: MINUTE_MS, slotMs: 1_000, per: "minute" },
  /** Deliveries POST /webhooks/{id}/replay queues, over the account's webhooks. */
  "replayed-deliveries": { limit: 20_000, windowMs: HOUR_MS, slotMs: MINUTE_MS, per: "hour" },
  /** Deliveries of live events (and `gap` envelopes) to the account's MCP events subscriptions, as the fan-out makes them. */
  "subscription-deliveries": { limit: 20_000, windowMs: HOUR_MS, slotMs: MINUTE_MS, per: "hour" },
} as const;

export type AccountBudget = keyof typeof ACCOUNT_BUDGETS;

/** The budget as a person reads it in a refusal or an answer: "10,000 sandbox changes per day". */
export const budgetLabel = (budget: AccountBudget) =>
  `${ACCOUNT_BUDGETS[budget].limit.toLocaleString("en")} ${budget.replace("-", " ")} per ${ACCOUNT_BUDGETS[budget].per}`;

/**
 * What a budget used, as [slot start, count] pairs, oldest first. A use counts until its slot's end + the window:
 * never earlier than the use itself + the window, so no window of that length ever holds more than the limit (a
 * use may count up to one slot longer than it strictly must). Slots keep the stored row small whatever the traffic:
 * at most window ÷ slot of them (96, 60, 60, 60).
 */
export type BudgetSlots = [start: number, count: number][];

export interface BudgetGrant {
  /** How many of the amount asked for were granted (whole: all or none). */
  granted: number;
  /** Used within the window, the grant included. */
  used: number;
  /** Milliseconds until the amount not granted would fit; 0 when all was granted. */
  refillMs: number;
}

/** What asking for nothing takes: no call to the object. */
export const NOTHING_TAKEN: BudgetGrant = { granted: 0, used: 0, refillMs: 0 };

/** The slots still in the window at `now`. */
export function liveSlots(slots: BudgetSlots, budget: AccountBudget, now: number): BudgetSlots {
  const { windowMs, slotMs } = ACCOUNT_BUDGETS[budget];
  return slots.filter(([start]) => start + slotMs + windowMs > now);
}

/**
 * Takes `amount` from the budget at `now` (slots as liveSlots leaves them; changed in place when granted): all of
 * it or none when `whole`, else as much as there is room for.
 */
export function takeFromBudget(
  slots: BudgetSlots,
  budget: AccountBudget,
  { now, amount, whole }: { now: number; amount: number; whole: boolean },
): BudgetGrant {
  const { limit, windowMs, slotMs } = ACCOUNT_BUDGETS[budget];
  const used = slots.reduce((sum, [, count]) => sum + count, 0);
  const room = Math.max(0, limit - used);
  const granted = whole ? (amount <= room ? amount : 0) : Math.min(amount, room);
  if (granted > 0) {
    const start = now - (now % slotMs);
    const last = slots.at(-1);
    if (last?.[0] === start) last[1] += granted;
    else slots.push([start, granted]);
  }
  // The oldest slots leave first: what was not granted fits once they have freed `short`.
  let refillMs = 0;
  if (granted < amount) {
    const short = used + amount - limit;
    let freed = 0;
    for (const [start, count] of slots) {
      freed += count;
      refillMs = start + slotMs + windowMs - now;
      if (freed >= short) break;
    }
  }
  return { granted, used: used + granted, refillMs };
}

/** The 429 for an amount a budget cannot take whole: it names the budget, what is used, and when the amount fits. */
export function budgetRefusal(budget: AccountBudget, amount: number, grant: BudgetGrant): ApiError {
  const seconds = Math.max(1, Math.ceil(grant.refillMs / 1000));
  const refillsAt = new Date(Date.now() + seconds * 1000).toISOString();
  return new ApiError(
    429,
    `Budget exceeded: ${budgetLabel(budget)} per account (a rolling ${ACCOUNT_BUDGETS[budget].per}); ` +
      `${grant.used.toLocaleString("en")} used, and ${amount.toLocaleString("en")} more would pass it, so nothing was done. ` +
      `There is room for them again in ${seconds} s (${refillsAt}).`,
    { "Retry-After": String(seconds) },
  );
}
