import { remember } from "../platform/bounded-map.ts";
import { isolateMap } from "../platform/isolate-memory.ts";
import type { WorkMeter } from "../platform/metered.ts";
import type { AccountBudget, BudgetGrant } from "./account-budgets.ts";
import { bucketName } from "./buckets.ts";
import type { Decision, Limits } from "./types.ts";

/**
 * Refusals of the fixed buckets (account, admin subject, client IP), remembered by this isolate until their
 * Retry-After, so a client hammering after a 429 does not keep that object busy. Only refusals, and only of
 * buckets whose limits never change: this never admits anything the object would refuse, and nothing another
 * isolate does can make a remembered answer wrong. A key's refusals are not remembered: a plan change or a
 * revocation made through another isolate must show on the key's next request (the key's object makes
 * repeated refusals cheap instead).
 */
const refusals = isolateMap<string, { until: number; decision: Decision }>();

/** A refusal of the bucket this isolate remembers (see `refusals`), if any: known without a call. */
export function rememberedRefusal(name: string): Decision | undefined {
  const entry = refusals.get(name);
  if (!entry) return undefined;
  const left = entry.until - Date.now();
  if (left <= 0) {
    refusals.delete(name);
    return undefined;
  }
  return { ...entry.decision, resetSeconds: Math.ceil(left / 1000), resetMs: left };
}

const bucket = (env: Env, name: string) => env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName(name));

/**
 * Admission for a bucket whose limits are fixed (account, admin subject, client IP); with `count: false`, only
 * whether it would admit a request now (a look at the client IP's bucket before a key's object looks up a key it has never read).
 */
export async function admitBucket(env: Env, name: string, limits: Limits, work: WorkMeter, { count = true } = {}): Promise<Decision> {
  const refused = rememberedRefusal(name);
  if (refused) return refused;
  const object = bucket(env, name);
  const decision: Decision = await work.called(count ? object.admit(limits) : object.peek(limits));
  if (!decision.allowed) remember(refusals, name, { until: Date.now() + decision.resetMs, decision });
  return decision;
}

/** An account's budgets (src/rate-limit/account-budgets.ts), taken from its RateLimitBucket object; each call counts into `work`. */
export const accountBudgets = (buckets: Env["RATE_LIMIT_BUCKETS"], work: WorkMeter) => ({
  take: (accountId: string, budget: AccountBudget, amount: number, { whole }: { whole: boolean }): Promise<BudgetGrant> =>
    work.called(buckets.get(buckets.idFromName(bucketName("account", accountId))).take(budget, amount, whole)),
});
export type AccountBudgets = ReturnType<typeof accountBudgets>;
