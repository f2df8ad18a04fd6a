import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { liveData } from "../key-data/live.ts";
import { sandboxData } from "../key-data/sandbox.ts";
import { accountSandbox } from "../sandbox/stub.ts";

/**
 * The one door (src/key-data/door.ts): once admission has admitted a key, its environment picks the data every API-key
 * read goes through, here and nowhere else. A test key's is its account's sandbox; a live key's, the catalogue.
 */
export const keyDataDoor: MiddlewareHandler<AppEnv> = async (c, next) => {
  const { credential, services } = c.var;
  if (credential?.kind === "api-key" && credential.key)
    c.set(
      "keyData",
      credential.key.environment === "test"
        ? sandboxData(services, accountSandbox(c.env.SANDBOX, services.work, credential.key.accountId))
        : liveData(services),
    );
  await next();
};
