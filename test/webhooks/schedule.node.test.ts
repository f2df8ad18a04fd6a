import { describe, expect, it } from "vitest";
import {
  JITTER,
  MAX_ATTEMPTS,
  MAX_QUEUE_DELAY_SECONDS,
  RETRY_DELAYS_SECONDS,
  retryDelaySeconds,
} from "../../src/webhooks/delivery/schedule.ts";
import wranglerToml from "../../wrangler.toml?raw";

const HOUR = 3600;

describe("the retry schedule", () => {
  it("grows, keeps every delay within the queue's 12 h, and spans about a day (8 attempts over ~27.6 h)", () => {
    expect(RETRY_DELAYS_SECONDS).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    for (let i = 1; i < RETRY_DELAYS_SECONDS.length; i++)
      expect(RETRY_DELAYS_SECONDS[i]).toBeGreaterThanOrEqual(RETRY_DELAYS_SECONDS[i - 1]!);
    expect(MAX_ATTEMPTS).toBe(8);
    const total = RETRY_DELAYS_SECONDS.reduce((a, b) => a + b, 0);
    expect(total / HOUR).toBeCloseTo(27.6, 1);
    // With the jitter at its extremes the whole span stays about a day.
    expect((total * (1 - JITTER)) / HOUR).toBeGreaterThan(20);
    expect((total * (1 + JITTER)) / HOUR).toBeLessThan(36);
  });

  it("jitters each delay by up to ±20 %, never over 12 h, and has none after the last attempt", () => {
    RETRY_DELAYS_SECONDS.forEach((base, i) => {
      const attempt = i + 1;
      expect(retryDelaySeconds(attempt, 0)).toBe(Math.round(base * 0.8));
      expect(retryDelaySeconds(attempt, 0.5)).toBe(base);
      expect(retryDelaySeconds(attempt, 0.999999)).toBeLessThanOrEqual(Math.min(MAX_QUEUE_DELAY_SECONDS, Math.round(base * 1.2)));
      for (let n = 0; n < 50; n++) expect(retryDelaySeconds(attempt)).toBeLessThanOrEqual(MAX_QUEUE_DELAY_SECONDS);
    });
    expect(retryDelaySeconds(MAX_ATTEMPTS)).toBeUndefined();
  });

  it("matches wrangler.toml: max_retries is the number of delays, and a dead-letter queue is set", () => {
    const consumer = /\[\[queues\.consumers\]\]([\s\S]*?)(?:\n\[|$)/.exec(wranglerToml)?.[1] ?? "";
    expect(consumer).toMatch(/^queue = "price-data-webhooks"$/m);
    expect(Number(/^max_retries = (\d+)$/m.exec(consumer)?.[1])).toBe(RETRY_DELAYS_SECONDS.length);
    expect(consumer).toMatch(/^dead_letter_queue = "price-data-webhooks-dlq"$/m);
  });
});
