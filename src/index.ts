import { buildApp } from "./app.ts";
import type { Env } from "./env.ts";

export { RateLimiter } from "./rate-limit/rate-limiter.ts";

const app = buildApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
