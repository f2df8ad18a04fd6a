/**
 * The schedule of `last_used_at` (src/api-keys/object/last-used.ts), in a leaf of its own so the scale model
 * (scripts/simulate.ts) reads the same numbers the code runs with.
 */
export const LAST_USED_SHARDS = 64;
/** How often a key's object marks a use: with the shard's flush delay, a listing is at most a minute behind. */
export const MARK_EVERY_MS = 50_000;
export const FLUSH_EVERY_MS = 10_000;
