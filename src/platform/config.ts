import { z } from "zod";

const requiredVar = (name: string) =>
  z.string({ error: `Server misconfigured: the ${name} variable is not set.` }).min(1, {
    error: `Server misconfigured: the ${name} variable is empty.`,
  });

const configSchema = z.object({
  IDP_ISSUER: requiredVar("IDP_ISSUER"),
  IDP_AUDIENCE: requiredVar("IDP_AUDIENCE"),
  IDP_JWKS_URL: requiredVar("IDP_JWKS_URL").pipe(z.url({ error: "Server misconfigured: IDP_JWKS_URL is not a URL." })),
  /** The `typ` header the IdP's access tokens carry: RFC 9068's by default (the local IdP's, and most IdPs' with that profile). */
  IDP_TOKEN_TYPE: z.string().min(1, { error: "Server misconfigured: the IDP_TOKEN_TYPE variable is empty." }).default("at+jwt"),
  KEY_PREFIX: z
    .string()
    .regex(/^[a-z][a-z0-9]{1,15}$/, { error: "Server misconfigured: KEY_PREFIX must be 2-16 lowercase letters or digits." })
    .default("pda"),
  WEBHOOK_SECRET_KEY: requiredVar("WEBHOOK_SECRET_KEY").refine((value) => decodesToAesKey(value), {
    error: "Server misconfigured: WEBHOOK_SECRET_KEY must be 32 random bytes in base64 (openssl rand -base64 32).",
  }),
  SECRET_SCANNING_KEYS_URL: z
    .url({ error: "Server misconfigured: SECRET_SCANNING_KEYS_URL is not a URL." })
    .default("https://api.github.com/meta/public_keys/secret_scanning"),
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
 * The validated configuration, or the sentence naming what is missing. `Env` is the global interface
 * that `npm run types` (wrangler types) generates from wrangler.toml into worker-env.d.ts.
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
