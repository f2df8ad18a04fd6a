/** The workers `npm run bench` loads side by side, and where each one's configuration is. */
export type WorkerName = "bare" | "ours" | "hono-rate-limiter" | "native" | "floor-rpc" | "floor-write";

export const LOADED: WorkerName[] = ["bare", "ours", "hono-rate-limiter", "native", "floor-rpc", "floor-write"];

/**
 * The order a round loads them in (every other round reversed): ours right next to floor-write, so the ratio the
 * hot path's aim is on compares two loads run back to back, not two the machine's drift had 40 s to move apart.
 */
export const LOAD_ORDER: WorkerName[] = ["bare", "hono-rate-limiter", "native", "floor-rpc", "ours", "floor-write"];

/** Workers that limit nothing, so exactness is not asked of them. */
export const UNLIMITED: WorkerName[] = ["bare", "floor-rpc", "floor-write"];

export const CONFIGS: Record<WorkerName, string> = {
  bare: "bench/peers/bare/wrangler.toml",
  ours: "wrangler.toml",
  "hono-rate-limiter": "bench/peers/hono-rate-limiter/wrangler.toml",
  native: "bench/peers/native/wrangler.toml",
  "floor-rpc": "bench/peers/floor-rpc/wrangler.toml",
  "floor-write": "bench/peers/floor-write/wrangler.toml",
};
