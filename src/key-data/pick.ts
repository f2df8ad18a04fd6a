import type { RequestServices } from "../http/app-env.ts";
import type { Environment } from "../platform/tables.ts";
import { accountSandbox } from "../sandbox/stub.ts";
import type { KeyData } from "./door.ts";
import { liveData } from "./live.ts";
import { sandboxData } from "./sandbox.ts";

/**
 * The one place an environment picks the data read (src/key-data/door.ts): a test key's, or a test export's, is its
 * account's sandbox; a live one's, the catalogue. A request's door is picked once admission has admitted its key
 * (src/pipeline/key-data.ts); an export's by its runner (src/exports/runner.ts), from the export's own record.
 */
export function keyDataFor(
  services: Pick<RequestServices, "db" | "alerts" | "replica" | "archive" | "catalogue" | "afterAnswer" | "work">,
  env: Pick<Env, "SANDBOX">,
  whose: { accountId: string; environment: Environment },
): KeyData {
  return whose.environment === "test"
    ? sandboxData(services, accountSandbox(env.SANDBOX, services.work, whose.accountId))
    : liveData(services);
}
