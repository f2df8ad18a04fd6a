import { z } from "zod";

/** Bindings and vars as wrangler.toml (and the tests' config) declare them. */
export interface Env {
  DB: D1Database;
  RATE_LIMITER: DurableObjectNamespace<import("./rate-limit/rate-limiter.ts").RateLimiter>;
  /** "true" adds X-Work-Counts (D1 queries and Durable Object calls) to every response: tests and the benchmark. */
  EXPOSE_WORK_COUNTS?: string;
  KEY_PREFIX?: string;
  IDP_ISSUER?: string;
  IDP_AUDIENCE?: string;
  IDP_JWKS_URL?: string;
}

const requiredVar = (name: string) =>
  z.string({ error: `Server misconfigured: the ${name} variable is not set.` }).min(1, {
    error: `Server misconfigured: the ${name} variable is empty.`,
  });

const configSchema = z.object({
  IDP_ISSUER: requiredVar("IDP_ISSUER"),
  IDP_AUDIENCE: requiredVar("IDP_AUDIENCE"),
  IDP_JWKS_URL: requiredVar("IDP_JWKS_URL").pipe(
    z.url({ error: "Server misconfigured: IDP_JWKS_URL is not a URL." }),
  ),
  KEY_PREFIX: z
    .string()
    .regex(/^[a-z][a-z0-9]{1,15}$/, { error: "Server misconfigured: KEY_PREFIX must be 2-16 lowercase letters or digits." })
    .default("pda"),
});

export type Config = z.infer<typeof configSchema>;

const cache = new WeakMap<object, Config | string>();

/**
 * The validated configuration, or the sentence naming what is missing.
 * Cached per env object, so the check costs nothing after an isolate's first request.
 */
export function readConfig(env: Env): Config | string {
  let config = cache.get(env);
  if (config === undefined) {
    const parsed = configSchema.safeParse(env);
    config = parsed.success ? parsed.data : (parsed.error.issues[0]?.message ?? "Server misconfigured.");
    cache.set(env, config);
  }
  return config;
}
