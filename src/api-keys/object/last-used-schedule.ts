/**
 * The schedule of `last_used_at` (src/api-keys/object/last-used.ts), in a leaf of its own so the scale model
 * (scripts/simulate.ts) reads the same numbers the code runs with.
 */
export const LAST_USED_SHARDS = 64;
/**
 * How often a key's object marks a use, and how soon a shard writes a mark to D1: together, with time to spare for
 * the write, a listing is at most 15 minutes behind (the contract's bound). D1 writes one row per mark, so the longer
 * the interval, the fewer rows: a key in steady use costs D1 one row per 14 minutes.
 */
export const MARK_EVERY_MS = 14 * 60_000;
export const FLUSH_EVERY_MS = 45_000;
/** How long a shard gathers the marks handed to it before it stores them, all in one row: at most one row a second. */
export const WRITE_EVERY_MS = 1_000;
/** How far `last_used_at` may lag a key's last admitted request. */
export const LAST_USED_LAG_MS = 15 * 60_000;
/** Marks per UPDATE: 5,000 × ~70 bytes of JSON stays far under D1's 2,000,000-byte value limit. */
export const MARKS_PER_STATEMENT = 5_000;
