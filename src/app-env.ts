import type { RequestIdVariables } from "hono/request-id";
import type { Account } from "./services/accounts.ts";
import type { Config, Env } from "./env.ts";
import type { Credential } from "./auth/credentials.ts";
import type { Work } from "./rate-limit/client.ts";

/** Hono's type parameter: the bindings and what middleware leaves on the context. */
export interface AppEnv {
  Bindings: Env;
  Variables: RequestIdVariables & {
    config: Config;
    credential: Credential;
    work: Work;
    account: Account;
    apiKey: { id: string; accountId: string };
  };
}
