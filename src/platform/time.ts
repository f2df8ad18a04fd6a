/** Lengths of time, defined once: durations, windows and retention are written as multiples of these. */
export const MINUTE_MS = 60_000;
export const HOUR_MS = 60 * MINUTE_MS;
export const DAY_MS = 24 * HOUR_MS;
export const DAY_SECONDS = DAY_MS / 1000;
