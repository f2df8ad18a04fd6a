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
  /** The IdP's public client for the dashboard (authorization code + PKCE); only /dashboard needs it. */
  DASHBOARD_CLIENT_ID?: string;
  /** Events and deliveries for the webhook consumer (src/webhooks/consumer.ts); same worker. */
  WEBHOOK_QUEUE: Queue<import("./webhooks/messages.ts").WebhookMessage>;
  /** A Worker secret: base64 of 32 random bytes, the AES-256-GCM key of the webhooks' signing secrets. */
  WEBHOOK_SECRET_KEY?: string;
  /** "true" (development only) lets webhooks target http:// and private addresses such as 127.0.0.1. */
  WEBHOOK_ALLOW_INSECURE_URLS?: string;
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
  WEBHOOK_SECRET_KEY: requiredVar("WEBHOOK_SECRET_KEY").refine((value) => decodesToAesKey(value), {
    error: "Server misconfigured: WEBHOOK_SECRET_KEY must be 32 random bytes in base64 (openssl rand -base64 32).",
  }),
  WEBHOOK_ALLOW_INSECURE_URLS: z
    .enum(["true", "false"], { error: 'Server misconfigured: WEBHOOK_ALLOW_INSECURE_URLS must be "true" or "false".' })
    .default("false")
    .transform((value) => value === "true"),
});

function decodesToAesKey(base64: string): boolean {
  try {
    return atob(base64).length === 32;
  } catch {
    return false;
  }
}

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
