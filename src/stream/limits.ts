/** The stream's limits, which its worker (src/stream/service.ts) and its hub (src/stream/hub.ts) both keep. */

export const MAX_STREAMS_PER_KEY = 5;
/** Over all of an account's keys: so an account's streams cost a bounded share of its hub however many keys it makes. */
export const MAX_STREAMS_PER_ACCOUNT = 25;
/** How long one stream's invocation lasts at most: its client reconnects with Last-Event-ID (the model's invocation). */
export const LIFETIME_MS = 5 * 60_000;
