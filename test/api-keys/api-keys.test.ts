import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { call, expectJson } from "../helpers/http.ts";
import { accountToken } from "../helpers/tokens.ts";

describe("API key lifecycle", () => {
  it("creates, lists, renames and revokes a key", async () => {
    const token = await accountToken("user-lifecycle");
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "Production server" } }), 201);
    expect(created).toMatchObject({ name: "Production server", status: "active" });
    expect(created.key).toMatch(/^pda_live_[0-9A-Za-z]{46}$/);
    expect(created.id).toMatch(/^key_/);
    expect(created.prefix).toBe(created.key.slice(0, 17));

    const listed = await expectJson(await call("GET", "/api-keys", { token }), 200);
    expect(listed.api_keys).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(created.key);

    const renamed = await expectJson(await call("PATCH", `/api-keys/${created.id}`, { token, body: { name: "Renamed" } }), 200);
    expect(renamed.name).toBe("Renamed");

    const revoked = await expectJson(await call("DELETE", `/api-keys/${created.id}`, { token }), 200);
    expect(revoked).toMatchObject({ id: created.id, status: "revoked" });
    expect(revoked.revoked_at).toBeTruthy();

    const again = await expectJson(await call("DELETE", `/api-keys/${created.id}`, { token }), 200);
    expect(again).toEqual(revoked);

    const rows = await env.DB.prepare("SELECT * FROM api_keys").all();
    expect(JSON.stringify(rows.results)).not.toContain(created.key);
  });

  it("PATCH with the values the record already has: 200 with the record, unchanged", async () => {
    const token = await accountToken("user-same-values");
    const created = await expectJson(await call("POST", "/api-keys", { token, body: { name: "Same" } }), 201);
    const before = (await expectJson(await call("GET", "/api-keys", { token }), 200)).api_keys[0];
    const patched = await expectJson(await call("PATCH", `/api-keys/${created.id}`, { token, body: { name: "Same" } }), 200);
    expect(patched).toEqual(before);
    await expectJson(await call("DELETE", `/api-keys/${created.id}`, { token }), 200);
    const revoked = await expectJson(await call("PATCH", `/api-keys/${created.id}`, { token, body: { name: "Same" } }), 200);
    expect(revoked).toMatchObject({ id: created.id, name: "Same", status: "revoked" });
  });
});
