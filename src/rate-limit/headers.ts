import type { Environment, PlanName } from "../platform/tables.ts";
import { PLAN_LIMITS } from "./plans.ts";
import type { Budget, Decision, Granularity, Limits } from "./types.ts";

/**
 * The contract's headers for a decision: X-RateLimit-*, the IETF RateLimit fields and, on a refusal, Retry-After.
 * Set straight onto the response (every response carries them, so no intermediate object per request); the
 * policy line depends only on the limits, so it is built again only when they differ from the last response's.
 * A request that counted in a route's budget (the whole list) has that budget as an entry of its own in both IETF
 * fields; refused by it, the budget alone is the RateLimit item, and the X-RateLimit-* and Retry-After are its.
 */
export function setRateLimitHeaders(headers: Headers, decision: Decision): void {
  const { limits, remaining, resetSeconds, budget } = decision;
  headers.set("X-RateLimit-Limit", String(limits.per_minute));
  headers.set("X-RateLimit-Remaining", String(remaining));
  headers.set("X-RateLimit-Reset", String(resetSeconds));
  const policy = policyOf(limits);
  headers.set("RateLimit-Policy", budget ? `${policy}, "${budget.name}";q=${budget.quota};w=${budget.windowSeconds}` : policy);
  const limitItem = `"${decision.exceeded ?? "minute"}";r=${remaining};t=${resetSeconds}`;
  const budgetItem = budget && `"${budget.name}";r=${budget.remaining};t=${budget.resetSeconds}`;
  headers.set("RateLimit", decision.exceeded === "budget" ? budgetItem! : budgetItem ? `${limitItem}, ${budgetItem}` : limitItem);
  if (!decision.allowed) headers.set("Retry-After", String(resetSeconds));
}

/** The last policy line built, by the limits' values: a key's limits arrive as a new object with each decision. */
let lastPolicy: { perMinute: number; perHour: number; perDay: number; line: string } | undefined;

function policyOf({ per_minute: perMinute, per_hour: perHour, per_day: perDay }: Limits): string {
  if (lastPolicy?.perMinute !== perMinute || lastPolicy.perHour !== perHour || lastPolicy.perDay !== perDay) {
    const line = `"minute";q=${perMinute};w=60, "hour";q=${perHour};w=3600, "day";q=${perDay};w=86400`;
    lastPolicy = { perMinute, perHour, perDay, line };
  }
  return lastPolicy.line;
}

const PERIODS: Record<number, string> = { 60: "minute", 3600: "hour", 86400: "day" };
/** A budget's window in words: "hour" for 3600 s. */
export const budgetPeriod = ({ windowSeconds }: Budget) => PERIODS[windowSeconds] ?? `${windowSeconds} seconds`;

/** Whose limits refused: an API key's (of its environment; `covers`: what the route's budget covers), else a fixed bucket's. */
interface Refused {
  covers?: string | undefined;
  keyEnvironment?: Environment | undefined;
}

/** A 429's words: `detail`, the contract's sentence; `help`, what to change, where the detail cannot say it. */
export interface RateLimitRefusal {
  detail: string;
  help?: string;
}

/**
 * A 429's words. For a route's budget, the detail names it, what it covers (`covers`, from the route's declaration)
 * and when it refills. For a limit, the detail is the contract's one sentence ("Rate limit exceeded: 10 requests per
 * minute.", which clients match), and `help` says when to retry and, for a live key, which plans allow more.
 */
export function rateLimitRefusal(decision: Decision, { covers, keyEnvironment }: Refused = {}): RateLimitRefusal {
  if (decision.exceeded === "budget") {
    const budget = decision.budget!;
    const refill = new Date(budget.refillsAt).toISOString().replace(".000Z", "Z");
    return {
      detail:
        `Rate limit exceeded: this key's "${budget.name}" budget, ${budget.quota} requests per ${budgetPeriod(budget)}${covers ? ` (${covers})` : ""}, ` +
        `is spent; it refills at ${refill}, in ${budget.resetSeconds} seconds.`,
    };
  }
  const period = decision.exceeded ?? "minute";
  const quota = quotaOf(decision.limits, period);
  const detail = `Rate limit exceeded: ${quota} requests per ${period}.`;
  const retry = `Retry after ${decision.resetSeconds} s (the Retry-After header).`;
  if (keyEnvironment === "test") return { detail, help: `${retry} A test key has the standard plan's limits whatever the account's plan.` };
  if (keyEnvironment === undefined) return { detail, help: retry };
  const larger = (Object.entries(PLAN_LIMITS) as [PlanName, Limits][]).filter(([, limits]) => quotaOf(limits, period) > quota);
  const more =
    larger.length === 0
      ? `No plan allows more: spread the requests over the ${period}.`
      : `A larger plan allows more: ${larger.map(([plan, limits]) => `${plan} ${quotaOf(limits, period).toLocaleString("en")} a ${period}`).join(", ")}.`;
  return { detail, help: `${retry} ${more}` };
}

const quotaOf = (limits: Limits, period: Granularity) =>
  ({ minute: limits.per_minute, hour: limits.per_hour, day: limits.per_day })[period];
