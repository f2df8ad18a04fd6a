import type { ObjectAnswer } from "../platform/metered.ts";
import { MeteredObject } from "../platform/metered-object.ts";
import { type AccountBudget, type BudgetGrant, type BudgetSlots, liveSlots, takeFromBudget } from "./account-budgets.ts";
import type { Decision, Limits } from "./types.ts";
import { type StoredCounters, Usage } from "./window.ts";

/** The bucket's counters: one row, written once per decision that changes them, read once per wake. */
type BucketRow = StoredCounters & Record<string, SqlStorageValue>;

/** Created by the first write: a bucket only ever looked at (a client IP's, before a key hash is looked up) stores nothing. */
const SCHEMA = `CREATE TABLE IF NOT EXISTS bucket (id INTEGER PRIMARY KEY CHECK (id = 1), log TEXT NOT NULL,
  hour_start INTEGER NOT NULL, hour_count INTEGER NOT NULL, day_start INTEGER NOT NULL, day_count INTEGER NOT NULL)`;

/** An account's budgets (src/rate-limit/account-budgets.ts), a row each, created by the first budget taken. */
const BUDGET_SCHEMA = "CREATE TABLE IF NOT EXISTS budget (name TEXT PRIMARY KEY, slots TEXT NOT NULL)";

/**
 * One object per fixed bucket (src/rate-limit/buckets.ts): a client IP, an account, an admin subject, the
 * secret-scanning reports. The caller knows the limits, which never change. Calls run one at a time and the
 * counters are written to its SQLite storage before the answer leaves, so neither concurrency nor eviction admits
 * extra. An API key's bucket is the key's own object (src/api-keys/object/key-object.ts), which also keeps what
 * the key may do. An account's object also keeps the account's budgets (`take`), with the same exactness.
 */
export class RateLimitBucket extends MeteredObject {
  private readonly usage: Usage;
  private hasSchema: boolean;
  /** The budgets' slots, read once per wake. */
  private budgets: Map<string, BudgetSlots> | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    this.hasSchema = sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'bucket'").toArray().length > 0;
    const row = this.hasSchema ? sql.exec<BucketRow>("SELECT * FROM bucket").toArray()[0] : undefined;
    this.usage = Usage.restored(row);
  }

  /** Decides and counts one request. */
  admit(limits: Limits): Decision & ObjectAnswer {
    const now = Date.now();
    const slid = this.usage.slide(now);
    const decision = this.usage.decide(now, limits);
    if (decision.allowed || slid > 0) this.persist(); // a refusal changes nothing to keep
    return this.reported(decision);
  }

  /** Whether the bucket would admit a request now, without counting one. */
  peek(limits: Limits): Decision & ObjectAnswer {
    const now = Date.now();
    const usage = new Usage([...this.usage.minuteLog], { ...this.usage.hour }, { ...this.usage.day });
    usage.slide(now);
    return this.reported(usage.decide(now, limits));
  }

  /**
   * Takes `amount` from one of the account's budgets: all or none when `whole`, else what there is room for. Written
   * before the answer, so neither concurrency nor eviction lets the account past it.
   */
  take(budget: AccountBudget, amount: number, whole: boolean): BudgetGrant & ObjectAnswer {
    const budgets = this.storedBudgets();
    const now = Date.now();
    const slots = liveSlots(budgets.get(budget) ?? [], budget, now);
    budgets.set(budget, slots);
    const grant = takeFromBudget(slots, budget, { now, amount, whole });
    if (grant.granted > 0) {
      const sql = this.ctx.storage.sql;
      sql.exec(BUDGET_SCHEMA);
      sql.exec("INSERT OR REPLACE INTO budget VALUES (?, ?)", budget, JSON.stringify(slots));
    }
    return this.reported(grant);
  }

  private storedBudgets(): Map<string, BudgetSlots> {
    if (this.budgets) return this.budgets;
    const sql = this.ctx.storage.sql;
    const stored = sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'budget'").toArray().length > 0;
    const rows = stored ? sql.exec<{ name: string; slots: string }>("SELECT name, slots FROM budget").toArray() : [];
    this.budgets = new Map(rows.map(({ name, slots }) => [name, JSON.parse(slots) as BudgetSlots]));
    return this.budgets;
  }

  private persist() {
    const sql = this.ctx.storage.sql;
    if (!this.hasSchema) {
      sql.exec(SCHEMA);
      this.hasSchema = true;
    }
    const { minuteLog, hour, day } = this.usage;
    sql.exec(
      "INSERT OR REPLACE INTO bucket VALUES (1, ?, ?, ?, ?, ?)",
      JSON.stringify(minuteLog),
      hour.start,
      hour.count,
      day.start,
      day.count,
    );
  }
}
