/** The stream's limits, which its worker (src/stream/service.ts) and its hub (src/stream/hub.ts) both keep. */

export const MAX_STREAMS_PER_KEY = 5;
/** Over all of an account's keys: so an account's streams cost a bounded share of its hub however many keys it makes. */
export const MAX_STREAMS_PER_ACCOUNT = 25;
/** How long one stream's invocation lasts at most: its client reconnects with Last-Event-ID (the model's invocation). */
export const LIFETIME_MS = 5 * 60_000;

/**
 * How many hubs hold the open streams (src/stream/stub.ts): an account's streams all live in one hub (so the hub keeps
 * its caps alone), and a hub serves every account hashed to it. At 10,000 open streams, 16 hubs hold ~625 each: a
 * publish is one request per hub, so the hubs' share of the ~1,000 requests a second a Durable Object serves is the
 * ingestion rate (one publish per ingestion that changed something) plus the streams' connects (10,000 streams
 * reconnecting every 5 minutes: ~2 a second per hub), far below it; and ~625 sockets' attachments (at most 2 KiB
 * each) are ~1.3 MB of a hub's 128 MB. More hubs would cost one more request per hub on every publish; fewer would
 * crowd a hub that also wakes on every connect. `npm run simulate` bounds a hub's requests and prices their duration.
 */
export const STREAM_HUB_COUNT = 16;
