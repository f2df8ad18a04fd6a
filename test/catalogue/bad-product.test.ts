import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import { changePrices, createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * A catalogue build never stops for one product's bad data (contract, fifth wave, "Money"): a product whose stored row
 * cannot be shown (here a total past 2^53-1 minor units, written before ingestion refused it) is left out and logged
 * once, and the build goes on; the others are served.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

/** The structured lines the build logged about left-out products. */
const leftOutLines = (spy: { mock: { calls: unknown[][] } }) =>
  spy.mock.calls
    .map(([line]) => JSON.parse(String(line)) as { source: string; message: string; product_id: string; sku: string })
    .filter((line) => line.source === "catalogue-build" && /left out/.test(line.message));

describe("a product whose stored total is past 2^53-1 minor units", () => {
  it("is left out of the snapshot and logged; the build completes and the other products are served, in full and incremental builds", async () => {
    const { key } = await freshAccount({ plan: "premium" });
    await createCompetitor({ id: "cmp_money", name: "Money Shop" });
    const good = await Promise.all(
      ["MONEY-A", "MONEY-C"].map((sku) => createProduct({ sku, offers: [{ competitor: "cmp_money", price: "10.00", shipping: "1.00" }] })),
    );
    const bad = await createProduct({ sku: "MONEY-B", offers: [{ competitor: "cmp_money", price: "10.00", shipping: "1.00" }] });
    // Stored straight into D1: each amount fits, their total (2^53) does not.
    await env.DB.prepare("UPDATE offers SET price_minor = ?, shipping_minor = 1 WHERE product_id = ?")
      .bind(Number.MAX_SAFE_INTEGER, bad.id)
      .run();
    const logged = vi.spyOn(console, "error");

    expect(await publishSnapshot()).toMatchObject({ built: true, full: true });
    const listed = await expectJson(await call("GET", "/products", { token: key }), 200);
    expect(listed.products.map((p) => p.sku)).toEqual(["MONEY-A", "MONEY-C"]);
    expect(listed.products[0]!.offers[0]).toMatchObject({ price: "10.00", total_price: "11.00" });
    expect(leftOutLines(logged)).toEqual([
      expect.objectContaining({ level: "error", product_id: bad.id, sku: "MONEY-B", error: expect.stringMatching(/not a whole number/) }),
    ]);
    await expectJson(await call("GET", `/products/${bad.id}`, { token: key }), 404);
    await expectJson(await call("GET", `/products/${good[0]!.id}`, { token: key }), 200);

    // An incremental build that re-reads the bad product's part (its neighbours changed) leaves it out again.
    logged.mockClear();
    await changePrices(["MONEY-A", "MONEY-C"]);
    expect(await publishSnapshot()).toMatchObject({ built: true });
    const again = await expectJson(await call("GET", "/products", { token: key }), 200);
    expect(again.products.map((p) => [p.sku, p.offers[0]!.price])).toEqual([
      ["MONEY-A", "10.01"],
      ["MONEY-C", "10.01"],
    ]);
    expect(leftOutLines(logged).map((line) => line.product_id)).toEqual([bad.id]);

    // An observation that mends it is taken (not a 500 on the old total), and the product is back.
    await ingest([{ sku: "MONEY-B", competitor: { id: "cmp_money", name: "Money Shop" }, price: "12.00", shipping_cost: "1.00" }]);
    await publishSnapshot();
    const mended = await expectJson(await call("GET", `/products/${bad.id}`, { token: key }), 200);
    expect(mended.offers[0]).toMatchObject({ price: "12.00", total_price: "13.00" });
  });
});
