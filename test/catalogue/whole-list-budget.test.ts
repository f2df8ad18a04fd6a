import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ApiError } from "../../client/index.ts";
import { HOUR_MS } from "../../src/platform/time.ts";
import { addKey, freshAccount } from "../helpers/accounts.ts";
import { createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { storeTodaysRates } from "../helpers/fx-rates.ts";
import { call, workCounts } from "../helpers/http.ts";

/**
 * The whole list with `currency` or without gzip, at most 60 an hour per key (contract, fifth wave): the 61st is 429
 * naming the "whole-list" budget and when it refills, with an entry of its own in RateLimit-Policy; filtered reads and
 * the stored gzip (no currency) are not counted in it.
 */

const GZIP = { "Accept-Encoding": "gzip" };
const ENTRY = '"whole-list";q=60;w=3600';
let key: string;
let token: string;

/** A read of the list; its body is let go unread (the headers are what is checked). */
async function list(query: string, headers: Record<string, string> = {}, as = key) {
  const res = await call("GET", `/products${query}`, { token: as, headers });
  if (res.status !== 200) return { res, detail: ((await res.json()) as ApiError).detail };
  await res.body?.cancel();
  return { res, detail: undefined };
}

const wholeListLeft = (res: Response) => /"whole-list";r=(\d+);t=\d+/.exec(res.headers.get("RateLimit") ?? "")?.[1];

// Time stands still mid-hour: the 60 reads fall in one window, and the test moves the clock to the next on purpose.
const start = Math.floor(Date.now() / HOUR_MS) * HOUR_MS + HOUR_MS / 2;
beforeAll(async () => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(start);
  ({ key, token } = await freshAccount({ plan: "premium" }));
  await createProduct({ sku: "WHOLE-1", brand: "Acme" });
  await storeTodaysRates(); // ?currency=EUR converts (a currency without a rate is refused)
  await publishSnapshot();
});
afterAll(() => vi.useRealTimers());

describe("the whole-list budget", () => {
  it("counts 60 whole-list reads with currency or without gzip, refuses the 61st naming it, and not the others", async () => {
    const counted = [
      ["", {}], // the identity list (the stored gzip inflated)
      ["", { Accept: "application/x-ndjson" }],
      ["?currency=EUR", {}], // converted
      ["?currency=EUR", GZIP], // converted, gzip or not
    ] as const;
    const notCounted = [
      ["", GZIP], // the stored bytes as they are
      ["?sku=WHOLE-1", {}],
      ["?brand=acme&currency=EUR", {}],
      ["?updated_since=2026-01-01", GZIP],
    ] as const;
    for (let i = 0; i < 60; i++) {
      const [query, headers] = counted[i % counted.length]!;
      const { res } = await list(query, headers);
      expect(res.status, `read ${i + 1}: ${query} ${JSON.stringify(headers)}`).toBe(200);
      expect(res.headers.get("RateLimit-Policy")).toContain(ENTRY);
      expect(wholeListLeft(res)).toBe(String(59 - i));
      // Counted by the key's object in the admission's one call: no other object, no D1.
      if (i > 0) expect(workCounts(res)).toMatchObject({ keyDo: 1, otherDo: 0, d1: 0 });
      if (i % 15 === 0) {
        // Between them, reads the budget does not cover: no entry of its, and nothing taken from it.
        for (const [other, otherHeaders] of notCounted) {
          const { res: passed } = await list(other, otherHeaders);
          expect(passed.status, other).toBe(200);
          expect(passed.headers.get("RateLimit-Policy")).not.toContain("whole-list");
        }
      }
    }

    const refill = new Date(start + HOUR_MS / 2).toISOString().replace(".000Z", "Z");
    for (const [query, headers] of counted) {
      const { res, detail } = await list(query, headers);
      expect(res.status, `${query} ${JSON.stringify(headers)}`).toBe(429);
      expect(detail).toContain('"whole-list" budget, 60 requests per hour');
      expect(detail).toContain(`refills at ${refill}, in 1800 seconds`);
      expect(res.headers.get("RateLimit-Policy")).toBe(`"minute";q=300;w=60, "hour";q=18000;w=3600, "day";q=432000;w=86400, ${ENTRY}`);
      expect(res.headers.get("RateLimit")).toBe('"whole-list";r=0;t=1800');
      expect(res.headers.get("Retry-After")).toBe("1800");
      expect(res.headers.get("X-RateLimit-Remaining")).toBe("0");
      expect(workCounts(res)).toEqual({ keyDo: 1, otherDo: 0, d1: 0 });
    }

    // What the budget does not cover still goes, and the key's other limits were not spent by the refusals.
    for (const [query, headers] of notCounted) expect((await list(query, headers)).res.status, query).toBe(200);
    // Another key of the same account has a budget of its own.
    const other = (await addKey(token)).key;
    expect(wholeListLeft((await list("", {}, other)).res)).toBe("59");
    // The next hour, it refills.
    vi.setSystemTime(start + HOUR_MS / 2);
    const { res } = await list("?currency=EUR");
    expect(res.status).toBe(200);
    expect(wholeListLeft(res)).toBe("59");
  }, 60_000);
});
