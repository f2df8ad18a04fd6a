import type { PlanName } from "../../src/platform/tables.ts";
import { call, expectJson } from "./http.ts";
import { accountToken, adminToken } from "./tokens.ts";

let counter = 0;

/** A fresh account on `plan` (set through the admin route) with one new API key. */
export async function accountWithKey(plan: PlanName = "free", sub = `acct-${Date.now()}-${++counter}`) {
  const admin = await adminToken();
  await expectJson(await call("PUT", `/admin/accounts/${encodeURIComponent(sub)}/plan`, { token: admin, body: { plan } }), 200);
  const token = await accountToken(sub);
  const created = await expectJson<{ id: string; key: string }>(
    await call("POST", "/api-keys", { token, body: { name: "test key" } }),
    201,
  );
  return { sub, token, keyId: created.id, key: created.key };
}

/** Another key for an existing account. */
export async function addKey(token: string) {
  return expectJson<{ id: string; key: string }>(await call("POST", "/api-keys", { token, body: { name: "another key" } }), 201);
}
