import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { mulberry32 } from "../../scripts/seeded-random.ts";
import { hashApiKey } from "../../src/api-keys/format.ts";
import type { UsageCount } from "../../src/api-keys/object/types.ts";
import { BUCKET_MS } from "../../src/api-keys/object/usage-range.ts";
import type { ApiKeyObject } from "../../src/index.ts";
import type { PlanName } from "../../src/platform/tables.ts";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { PLAN_LIMITS } from "../../src/rate-limit/plans.ts";
import type { Limits } from "../../src/rate-limit/types.ts";
import { RESTARTED_BY_THE_TEST } from "../helpers/abort-reason.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { fakeDateAt } from "../helpers/clock.ts";

// Each run has two stretches of about 3 minutes: across an hour's end, then across the day's.
const T0 = Date.parse("2030-07-01T22:58:00Z");
const STRETCHES = [T0, T0 + HOUR_MS];
fakeDateAt(T0);

const REQUEST = { ip: "203.0.113.9", scope: undefined };

/**
 * A key's object, restarted at random points: its instance (and all it holds in memory) dropped, its storage kept. A
 * restart is either a call of its own among the requests, or made inside the object right after the write of the
 * state row, before the answer of the call that wrote it leaves.
 */
async function keyUnderRestarts(plan: PlanName) {
  const { key } = await freshAccount({ plan });
  const keyHash = await hashApiKey(key);
  // A stub per call: one that has seen its object restarted stays broken.
  const id = env.API_KEY_OBJECTS.idFromName(keyHash);
  const stub = () => env.API_KEY_OBJECTS.get(id) as DurableObjectStub<ApiKeyObject>;
  const admit = () => stub().admitKey(keyHash, REQUEST);
  const restart = () => runInDurableObject(stub(), (_object, state) => state.abort(RESTARTED_BY_THE_TEST)).catch(() => undefined);
  /** The next write of the state row restarts the object, once, before its answer. */
  const hookNextWrite = () =>
    runInDurableObject(stub(), (object, state) => {
      const writable = object as unknown as { persist(now: number): void };
      const persist = writable.persist.bind(object);
      writable.persist = (now) => {
        persist(now);
        writable.persist = persist;
        state.abort(RESTARTED_BY_THE_TEST);
      };
    });
  // The first call to an object just restarted may still meet the old instance's end.
  const restartAfterNextWrite = () => hookNextWrite().catch(hookNextWrite);
  return { stub, admit, restart, restartAfterNextWrite };
}

interface Run {
  /** When each answered admission was decided (the clock's time when it was sent: calls at one instant share it). */
  admitted: number[];
  /** The windows that refused a request. */
  refusedBy: Set<string>;
  /** Calls that failed: their object was restarted before they were answered, so they may or may not be counted. */
  failed: number[];
  restarts: number;
  usage: UsageCount[];
}

/**
 * One seeded run: bursts of concurrent requests, the clock moved on by 0 to 15 s between them, over two stretches
 * (STRETCHES), with restarts at random points. The key's limits are the plan's per minute and tighter per hour and
 * per day, so that every window refuses within the run.
 */
async function run(seed: number, plan: "free" | "premium", limits: Limits): Promise<Run> {
  const next = mulberry32(seed);
  vi.setSystemTime(T0);
  const key = await keyUnderRestarts(plan);
  const result: Run = { admitted: [], refusedBy: new Set(), failed: [], restarts: 0, usage: [] };
  const send = async () => {
    const sentAt = Date.now();
    try {
      const answer = await key.admit();
      if (answer.status !== "active") throw new Error(`the key's object answered ${answer.status}`);
      if (answer.decision.allowed) result.admitted.push(sentAt);
      else result.refusedBy.add(answer.decision.exceeded!);
    } catch {
      result.failed.push(sentAt);
    }
  };
  await send(); // the object reads the key
  await key.stub().setLimits(limits);
  for (let step = 0; step < 50; step++) {
    if (step === 25) vi.setSystemTime(STRETCHES[1]!);
    vi.setSystemTime(Date.now() + Math.floor(next() * 15_000));
    const burst = 1 + Math.floor(next() * limits.per_minute * 0.4);
    const calls = Array.from({ length: burst }, send);
    const dice = next();
    if (dice < 0.15) {
      // Among the calls: the ones before it answered, the ones after it go to a new instance.
      calls.splice(Math.floor(next() * burst), 0, key.restart());
      result.restarts++;
    } else if (dice < 0.3) {
      await key.restartAfterNextWrite();
      result.restarts++;
    }
    await Promise.all(calls);
  }
  // Any restart armed after the run's last write happens now, counted above.
  await key.restart();
  result.usage = await usageOf(key.stub());
  return result;
}

async function usageOf(stub: DurableObjectStub<ApiKeyObject>): Promise<UsageCount[]> {
  const { buckets } = await stub.usageBuckets({ granularity: "minute", from: T0 - HOUR_MS, to: T0 + 3 * HOUR_MS });
  return buckets.map(({ start, admitted, refused, uncertain }) => ({ start, admitted, refused, uncertain }));
}

/** The most admissions of `times` (sorted) in any window of `width` that slides (`(t − width, t]`). */
function mostInSlidingWindow(times: readonly number[], width: number): number {
  let most = 0;
  for (let end = 0, start = 0; end < times.length; end++) {
    while (times[start]! <= times[end]! - width) start++;
    most = Math.max(most, end - start + 1);
  }
  return most;
}

/** How many of `times` fall in each clock-aligned window of `width`. */
function perFixedWindow(times: readonly number[], width: number): Map<number, number> {
  const counts = new Map<number, number>();
  for (const at of times) counts.set(at - (at % width), (counts.get(at - (at % width)) ?? 0) + 1);
  return counts;
}

/** The usage buckets' sums per clock-aligned window of `width`. */
function usagePer(usage: readonly UsageCount[], width: number, field: "admitted" | "uncertain"): Map<number, number> {
  const sums = new Map<number, number>();
  for (const bucket of usage) {
    const start = bucket.start - (bucket.start % width);
    sums.set(start, (sums.get(start) ?? 0) + bucket[field]);
  }
  return sums;
}

const PLANS = {
  free: { ...PLAN_LIMITS.free, per_hour: 25, per_day: 40 },
  premium: { ...PLAN_LIMITS.premium, per_hour: 700, per_day: 1_100 },
} as const;

describe("admissions reserved in blocks, with the key's object restarted at random points", () => {
  for (const plan of ["free", "premium"] as const) {
    it(`${plan}: 0 over-admission in any window; usage never below what was admitted; a block uncertain per restart at most`, async () => {
      const limits = PLANS[plan];
      let restarts = 0;
      let uncertain = 0;
      let cutShort = 0;
      const refusedBy = new Set<string>();
      for (let seed = 1; seed <= 20; seed++) {
        const { admitted, failed, usage, ...counted } = await run(seed * 7919 + (plan === "free" ? 0 : 1), plan, limits);
        restarts += counted.restarts;
        cutShort += failed.length;
        for (const window of counted.refusedBy) refusedBy.add(window);
        const context = `seed ${seed}`;
        expect(mostInSlidingWindow(admitted, MINUTE_MS), context).toBeLessThanOrEqual(limits.per_minute);
        for (const count of perFixedWindow(admitted, HOUR_MS).values()) expect(count, context).toBeLessThanOrEqual(limits.per_hour);
        for (const count of perFixedWindow(admitted, DAY_MS).values()) expect(count, context).toBeLessThanOrEqual(limits.per_day);
        // A block never crosses its hour, so each hour's usage holds what it admitted: all of it, and what it cannot
        // vouch for is marked. What it vouches for was decided, by a call answered or one whose answer was lost.
        const used = usagePer(usage, HOUR_MS, "admitted");
        const unsure = usagePer(usage, HOUR_MS, "uncertain");
        const answered = perFixedWindow(admitted, HOUR_MS);
        const lost = perFixedWindow(failed, HOUR_MS);
        for (const [hour, count] of answered) expect(used.get(hour) ?? 0, context).toBeGreaterThanOrEqual(count);
        for (const [hour, count] of used) {
          expect(count - (unsure.get(hour) ?? 0), context).toBeLessThanOrEqual((answered.get(hour) ?? 0) + (lost.get(hour) ?? 0));
        }
        const runUncertain = usage.reduce((sum, b) => sum + b.uncertain, 0);
        expect(runUncertain, context).toBeLessThanOrEqual(counted.restarts * limits.per_minute);
        uncertain += runUncertain;
      }
      // Every window refused (the runs reach each limit), restarts happened, and some of them left a block unused.
      expect([...refusedBy].sort()).toEqual(["day", "hour", "minute"]);
      expect(restarts).toBeGreaterThan(20);
      expect(cutShort, "calls a restart cut short (after a write, or queued behind one)").toBeGreaterThan(0);
      expect(uncertain).toBeGreaterThan(0);
    }, 300_000);
  }

  it("pushes apply to the very next request, whatever the block still holds", async () => {
    vi.setSystemTime(T0);
    const { key, keyId } = await freshAccount({ plan: "premium" });
    const keyHash = await hashApiKey(key);
    const stub = env.API_KEY_OBJECTS.get(env.API_KEY_OBJECTS.idFromName(keyHash));
    const admit = () => stub.admitKey(keyHash, REQUEST);
    for (let i = 0; i < 5; i++) expect(await admit()).toMatchObject({ status: "active", decision: { allowed: true } });
    // The 4th's block of 4 has 2 left; a plan of 5 a minute refuses the 6th all the same.
    await stub.setLimits({ per_minute: 5, per_hour: 100, per_day: 1000 });
    expect(await admit()).toMatchObject({ status: "active", decision: { allowed: false, exceeded: "minute" } });
    await stub.setLimits(PLAN_LIMITS.premium);
    expect(await admit()).toMatchObject({ status: "active", decision: { allowed: true } });
    await stub.revoke(keyId, "any");
    expect(await admit()).toMatchObject({ status: "revoked" });
  });

  it("a block left unused is released by the key's alarm once it has ended: usage exact through an eviction", async () => {
    vi.setSystemTime(T0);
    const key = await keyUnderRestarts("standard");
    await key.admit();
    // With the first, five at once, then a quiet minute: the 4th's block (of 4) is left with 2 unused.
    for (let i = 0; i < 4; i++) await key.admit();
    vi.setSystemTime(T0 + MINUTE_MS + 5_000);
    expect(await runDurableObjectAlarm(key.stub())).toBe(true);
    await key.restart();
    const usage = await usageOf(key.stub());
    expect(usage.map((b) => [b.start, b.admitted, b.uncertain])).toEqual([[T0 - (T0 % BUCKET_MS.minute), 5, 0]]);
  });
});
