import { describe, expect, it } from "vitest";
import { ACCOUNT_BUDGETS, type BudgetSlots, liveSlots, takeFromBudget } from "../../src/rate-limit/account-budgets.ts";

// The rolling windows of the per-account budgets on their own (the account's object persists the slots).
const { limit, windowMs } = ACCOUNT_BUDGETS["test-deliveries"];

function take(slots: BudgetSlots, now: number, amount: number, whole = false) {
  const live = liveSlots(slots, "test-deliveries", now);
  const grant = takeFromBudget(live, "test-deliveries", { now, amount, whole });
  return { slots: live, grant };
}

describe("takeFromBudget", () => {
  it("whole: all or nothing; otherwise as much as there is room for", () => {
    let { slots, grant } = take([], 0, 550, true);
    expect(grant).toEqual({ granted: 550, used: 550, refillMs: 0 });
    ({ slots, grant } = take(slots, 10, 51, true));
    expect(grant.granted).toBe(0);
    ({ slots, grant } = take(slots, 20, 80));
    expect(grant).toMatchObject({ granted: 50, used: 600 });
  });

  it("never lets any window hold more than the limit, and what it held back fits exactly when it says", () => {
    const granted: [at: number, count: number][] = [];
    let slots: BudgetSlots = [];
    for (let now = 0; now < 5 * windowMs; now += 777) {
      const result = take(slots, now, 1 + (now % 37));
      slots = result.slots;
      if (result.grant.granted > 0) granted.push([now, result.grant.granted]);
      const inWindow = granted.filter(([at]) => at > now - windowMs).reduce((sum, [, count]) => sum + count, 0);
      expect(inWindow).toBeLessThanOrEqual(limit);
    }
    const { grant } = take(slots, 5 * windowMs, limit, true);
    expect(grant.granted).toBe(0);
    const at = 5 * windowMs + grant.refillMs;
    expect(take(slots, at - 1, limit, true).grant.granted).toBe(0);
    expect(take(slots, at, limit, true).grant.granted).toBe(limit);
  });
});
