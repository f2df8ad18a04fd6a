import { DAY_MS } from "../platform/time.ts";

/** An account's sandbox changes, history and events are kept this long (src/sandbox/object.ts); the live feed's 30 days do not apply. */
export const SANDBOX_RETENTION_DAYS = 7;
export const SANDBOX_RETENTION_MS = SANDBOX_RETENTION_DAYS * DAY_MS;
