// The 400 detail the dashboard reads back to name a field in its form's words (src/http/field-detail.ts): what the
// real API answers for a refused field comes apart into the field's path and the message, and nothing else does.
import { describe, expect, it } from "vitest";
import { readFieldDetail } from "../../src/http/field-detail.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { call, expectJson } from "../helpers/http.ts";

async function detailOf(path: "/webhooks" | "/api-keys", body: unknown): Promise<string> {
  const { token } = await freshAccount();
  const { detail } = await expectJson<{ detail: string }>(await call("POST", path, { token, body: body as never }), 400);
  return detail;
}

describe("a 400's field, as the dashboard reads it", () => {
  it("names a rule's list entry by its index, and a cross-field rule by the field it asks for", async () => {
    const url = "https://hooks.example.com/prices";
    const tooLong = await detailOf("/webhooks", { url, filters: { brands: ["Acme", "x".repeat(201)] } });
    expect(readFieldDetail(tooLong)).toEqual({ path: ["filters", "brands", 1], message: "must be at most 200 characters" });
    const noCurrency = await detailOf("/webhooks", { url, filters: { price_below: "12.00" } });
    expect(readFieldDetail(noCurrency)).toEqual({
      path: ["filters", "currency"],
      message: "is required with price_below (the currency the amounts are in)",
    });
  });

  it("reads an address list's entry and a URL refused by the service's own check alike", async () => {
    const address = await detailOf("/api-keys", { name: "k", allowed_ips: ["203.0.113.0/24", "not-an-address"] });
    expect(readFieldDetail(address)?.path).toEqual(["allowed_ips", 1]);
    const ftp = await detailOf("/webhooks", { url: "ftp://example.com/hook" });
    expect(readFieldDetail(ftp)?.path).toEqual(["url"]);
  });

  it("finds no field in a detail about the whole body, or in any other text", async () => {
    const notObject = await detailOf("/webhooks", ["not", "an", "object"]);
    expect(readFieldDetail(notObject)).toBeUndefined();
    expect(readFieldDetail("This account already has 100 active keys; revoke one first.")).toBeUndefined();
  });
});
