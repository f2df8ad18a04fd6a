import type { Budget, BudgetUse, Decision, Limits } from "../../rate-limit/types.ts";
import type { Counter } from "../../rate-limit/window.ts";

/** Created by the first request that counts in a budget: a key that never does stores nothing more. */
const SCHEMA = "CREATE TABLE IF NOT EXISTS budgets (name TEXT PRIMARY KEY, window_start INTEGER NOT NULL, used INTEGER NOT NULL)";

/**
 * The budgets a key's requests count in beside its limits, named by their routes' declarations (the whole list's: 60
 * an hour): a clock-aligned window's count each, one row per budget in a table of their own, read by the first request
 * of a wake that needs one (never by the others) and written before the answer leaves, like the key's counters, so no
 * restart hands out a fresh window.
 */
export class KeyBudgets {
  private counters: Map<string, Counter> | undefined;
  private hasTable = false;

  constructor(private readonly sql: SqlStorage) {}

  /** What is left of `budget` now. */
  left(budget: Budget, now: number): BudgetUse {
    const { start, count } = this.counter(budget, now);
    const refillsAt = start + budget.windowSeconds * 1000;
    const resetSeconds = Math.max(1, Math.ceil((refillsAt - now) / 1000));
    return { ...budget, remaining: Math.max(0, budget.quota - count), resetSeconds, refillsAt };
  }

  /** Counts an admitted request in `budget`; what is left after it. */
  spend(budget: Budget, now: number): BudgetUse {
    const counter = this.counter(budget, now);
    counter.count++;
    if (!this.hasTable) this.sql.exec(SCHEMA);
    this.hasTable = true;
    this.sql.exec("INSERT OR REPLACE INTO budgets (name, window_start, used) VALUES (?, ?, ?)", budget.name, counter.start, counter.count);
    return this.left(budget, now);
  }

  private counter(budget: Budget, now: number): Counter {
    this.counters ??= this.read();
    const start = now - (now % (budget.windowSeconds * 1000));
    let counter = this.counters.get(budget.name);
    if (counter?.start !== start) {
      counter = { start, count: 0 };
      this.counters.set(budget.name, counter);
    }
    return counter;
  }

  private read(): Map<string, Counter> {
    this.hasTable = this.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'budgets'").toArray().length > 0;
    const rows = this.hasTable
      ? this.sql.exec<{ name: string; window_start: number; used: number }>("SELECT * FROM budgets").toArray()
      : [];
    return new Map(rows.map((row) => [row.name, { start: row.window_start, count: row.used }]));
  }
}

/** The refusal of a request whose budget is spent: counted nowhere, its headers and Retry-After the budget's. */
export const budgetSpent = (budget: BudgetUse, limits: Limits, now: number): Decision => ({
  allowed: false,
  limits,
  remaining: 0,
  resetSeconds: budget.resetSeconds,
  resetMs: budget.refillsAt - now,
  exceeded: "budget",
  budget,
});
