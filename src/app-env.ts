import type { RequestIdVariables } from "hono/request-id";
import type { Account } from "./services/accounts.ts";
import type { Config, Env } from "./env.ts";
import type { Identity } from "./auth/idp.ts";

/** Hono's type parameter: the bindings and what middleware leaves on the context. */
export interface AppEnv {
  Bindings: Env;
  Variables: RequestIdVariables & {
    config: Config;
    identity: Identity;
    account: Account;
    apiKey: { id: string; accountId: string };
  };
}
