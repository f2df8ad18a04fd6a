import { env } from "cloudflare:workers";
import type { FactSources } from "../../src/alerts/environments.ts";
import { type Database, database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { sandboxFactsOf } from "../../src/sandbox/facts.ts";
import { accountSandbox } from "../../src/sandbox/stub.ts";
import { freshAccount } from "./accounts.ts";
import { call, expectJson } from "./http.ts";

/** An account's sandbox object, its calls counted on a meter of their own. */
export const sandboxOf = (accountId: string, work = new WorkMeter()) => accountSandbox(env.SANDBOX, work, accountId);

/** Where a fan-out's or a hub's facts come from: this D1 (and the alert windows' own) and the accounts' sandbox objects. */
export const factSources = (db: Database, alerts = database(env.ALERTS_DB)): FactSources => ({
  db,
  alerts,
  sandboxFacts: sandboxFactsOf((accountId) => sandboxOf(accountId)),
});

/** A fresh premium account with a test key of its own (`testKey`, `testKeyId`) beside its live one. */
export async function testAccount() {
  const account = await freshAccount({ plan: "premium" });
  const created = await expectJson(
    await call("POST", "/api-keys", { token: account.token, body: { name: "sandbox", environment: "test" } }),
    201,
  );
  return { ...account, testKey: created.key as string, testKeyId: created.id as string };
}
