/**
 * When a failed delivery is tried again: Svix's schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h
 * after attempts 1–7), so an endpoint that is down gets 8 attempts over about 27.6 hours. Each delay
 * gets ±20 % jitter, so endpoints that failed together are not all retried in the same second, and
 * no delay goes over the queue's 12 h maximum. wrangler.toml's `max_retries` equals the number of
 * delays: after the last attempt fails, the queue moves the message to the dead-letter queue.
 */
export const RETRY_DELAYS_SECONDS = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600] as const;

export const MAX_ATTEMPTS = RETRY_DELAYS_SECONDS.length + 1;

/** Cloudflare Queues refuses a retry delay over 12 hours. */
export const MAX_QUEUE_DELAY_SECONDS = 12 * 3600;

export const JITTER = 0.2;

/**
 * The delay before the attempt after `attempt` (1-based, the one that just failed), or undefined
 * when that was the last. `random` is in [0, 1), as Math.random gives.
 */
export function retryDelaySeconds(attempt: number, random: number = Math.random()): number | undefined {
  const base = RETRY_DELAYS_SECONDS[attempt - 1];
  if (base === undefined) return undefined;
  const jittered = Math.round(base * (1 - JITTER + 2 * JITTER * random));
  return Math.min(MAX_QUEUE_DELAY_SECONDS, Math.max(1, jittered));
}
