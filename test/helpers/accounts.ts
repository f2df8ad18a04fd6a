import type { PlanName } from "../../src/platform/tables.ts";
import { call, expectJson } from "./http.ts";
import { accountToken, adminToken } from "./tokens.ts";

let counter = 0;

/**
 * A new account of its own: its plan set through the admin route (free unless told), its login
 * token, and one new API key. Pass `sub` only where the test needs to know the id beforehand.
 */
export async function freshAccount({ plan = "free", sub = `acct-${Date.now()}-${++counter}` }: { plan?: PlanName; sub?: string } = {}) {
  const admin = await adminToken();
  await expectJson(await call("PUT", `/admin/accounts/${encodeURIComponent(sub)}/plan`, { token: admin, body: { plan } }), 200);
  const token = await accountToken(sub);
  const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "test key" } }), 201);
  return { sub, token, keyId: created.id, key: created.key };
}

/** Another key for an existing account. */
export async function addKey(token: string) {
  return expectJson(await call("POST", "/api-keys", { token, body: { name: "another key" } }), 201);
}
