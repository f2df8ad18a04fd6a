import { env } from "cloudflare:workers";
import { eq, inArray } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { database } from "../../src/platform/db.ts";
import { catalogueState, competitors, products } from "../../src/platform/tables.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { buildSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";
import { adminToken } from "../helpers/tokens.ts";
import { ingest } from "../helpers/webhooks.ts";

const db = () => database(env.DB);
const state = async () => (await db().select().from(catalogueState).get())!;
const patch = async (id: string, body: unknown, token?: string) =>
  call("PATCH", `/admin/competitors/${id}`, { token: token ?? (await adminToken()), body });

let key: string;
beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
});

/** A competitor with offers for two new products, in a built snapshot. */
async function stocked() {
  const id = `cmp_${crypto.randomUUID().slice(0, 8)}`;
  const skus = [`REN-${crypto.randomUUID()}`, `REN-${crypto.randomUUID()}`];
  await ingest(
    skus.map((sku) => ({ sku, competitor: { id, name: "Shop Ünïcode 🛒", domain: "shop.example" }, observed_at: "2026-05-01T10:00:00Z" })),
  );
  await buildSnapshot();
  return { id, skus };
}

describe("PATCH /admin/competitors/:id", () => {
  it("renames: the record, then one full rebuild shows the name in every offer, without marking a product", async () => {
    const { id, skus } = await stocked();
    const marks = () => db().select({ v: products.changedVersion }).from(products).where(inArray(products.sku, skus)).all();
    const [before, marksBefore] = [await state(), await marks()];

    const body = await expectJson(await patch(id, { name: "Shop Renamed", domain: "renamed.example" }), 200);
    expect(body).toEqual({ id, name: "Shop Renamed", domain: "renamed.example", offer_count: 2 });
    const after = await state();
    expect(after.version).toBe(before.version + 1);
    expect(after.resetVersion).toBe(after.version); // the builder's cue for a full build
    expect(await marks()).toEqual(marksBefore);

    const report = await buildSnapshot();
    expect(report).toMatchObject({ built: true, full: true });
    const list = await expectJson(await call("GET", "/products", { token: key }), 200);
    for (const sku of skus) expect(list.products.find((p) => p.sku === sku)!.offers[0]!.competitor_name).toBe("Shop Renamed");
    const listed = await expectJson(await call("GET", "/competitors", { token: key }), 200);
    expect(listed.competitors.find((c) => c.id === id)).toEqual({ id, name: "Shop Renamed", domain: "renamed.example", offer_count: 2 });
  });

  it("the values it already has: 200 with the record, nothing written; null clears the domain", async () => {
    const { id } = await stocked();
    const before = await state();
    expect(await expectJson(await patch(id, { name: "Shop Ünïcode 🛒", domain: "shop.example" }), 200)).toEqual({
      id,
      name: "Shop Ünïcode 🛒",
      domain: "shop.example",
      offer_count: 2,
    });
    expect(await expectJson(await patch(id, { name: "  Shop Ünïcode 🛒 " }), 200)).toMatchObject({ name: "Shop Ünïcode 🛒" });
    expect(await state()).toEqual(before);
    expect(await expectJson(await patch(id, { domain: null }), 200)).toMatchObject({ name: "Shop Ünïcode 🛒", domain: null });
    expect(await db().select().from(competitors).where(eq(competitors.id, id)).get()).toEqual({
      id,
      name: "Shop Ünïcode 🛒",
      domain: null,
    });
  });

  it("refuses an unknown id (404), an empty or invalid body (400), and a token without prices:write (403)", async () => {
    const { id } = await stocked();
    expect((await expectJson(await patch("cmp_nobody", { name: "X" }), 404)).detail).toContain("cmp_nobody");
    expect((await expectJson(await patch(id, {}), 400)).detail).toBe("Invalid body: name at least one of name, domain");
    expect((await expectJson(await patch(id, { name: "   " }), 400)).detail).toBe("Invalid body: name: must not be empty");
    expect((await expectJson(await patch(id, { name: "x".repeat(201) }), 400)).detail).toContain("name: must be at most 200 characters");
    expect((await expectJson(await patch(id, { name: "X", owner: "me" }), 400)).detail).toContain("owner");
    await expectJson(await patch(id, { name: "X" }, await adminToken("admin-user", "accounts:write")), 403);
    await expectJson(await patch(id, { name: "X" }, key), 403);
  });
});
