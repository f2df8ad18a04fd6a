import { afterEach, beforeEach, vi } from "vitest";

/**
 * Every test of the file starts with Date at `start` (the worker and its Durable Objects run in the
 * test's isolate, so they see it too); only Date is faked, timers run as usual.
 */
export function fakeDateAt(start: number): void {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(start);
  });
  afterEach(() => vi.useRealTimers());
}
