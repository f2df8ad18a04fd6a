import { vi } from "vitest";

/**
 * How long `settled` waits at most: a guard against a hang, not a claim about speed. Under the workers project's 20 s
 * a test (vitest.config.ts), so a failure shows the assertion's own message rather than a test timeout.
 */
const SETTLE_TIMEOUT_MS = 15_000;

/**
 * Waits until `assertion` passes (polled every `interval` ms) and returns what it returned. What an answer sets off (an
 * object's waitUntil, a queue batch, a delivery, a final tally) ends when a loaded machine gets to it, so a test waits
 * on that condition, never on a time of its own: a second or two was enough on an idle machine and not under load.
 */
export const settled = <T>(assertion: () => T | Promise<T>, interval = 20): Promise<T> =>
  vi.waitFor(assertion, { timeout: SETTLE_TIMEOUT_MS, interval });
