import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { keyDataFor } from "../key-data/pick.ts";

/**
 * The one door (src/key-data/door.ts): once admission has admitted a key, its environment picks the data every API-key
 * read goes through, here and nowhere else in a request, through keyDataFor (which an export's runner uses too). A test
 * key's is its account's sandbox; a live key's, the catalogue.
 */
export const keyDataDoor: MiddlewareHandler<AppEnv> = async (c, next) => {
  const { credential, services } = c.var;
  if (credential?.kind === "api-key" && credential.key) c.set("keyData", keyDataFor(services, c.env, credential.key));
  await next();
};
