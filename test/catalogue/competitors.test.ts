import { beforeAll, describe, expect, it } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import { createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";

let key: string;

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_amazon", name: "Amazon", domain: "amazon.com" });
  await createCompetitor({ id: "cmp_bestbuy", name: "Best Buy", domain: "bestbuy.com" });
  await createCompetitor({ id: "cmp_idle", name: "Idle Shop", domain: null });
  await createProduct({
    offers: [
      { competitor: "cmp_amazon", price: "1.00" },
      { competitor: "cmp_bestbuy", price: "1.10" },
    ],
  });
  await createProduct({ offers: [{ competitor: "cmp_amazon", price: "2.00" }] });
  await publishSnapshot();
});

describe("GET /competitors", () => {
  it("lists every competitor with its offer count", async () => {
    const res = await call("GET", "/competitors", { token: key });
    expect(await expectJson(res, 200)).toEqual({
      competitors: [
        { id: "cmp_amazon", name: "Amazon", domain: "amazon.com", offer_count: 2 },
        { id: "cmp_bestbuy", name: "Best Buy", domain: "bestbuy.com", offer_count: 1 },
        { id: "cmp_idle", name: "Idle Shop", domain: null, offer_count: 0 },
      ],
    });
    expect(res.headers.get("ETag")).toMatch(/^"[^"]+"$/);
  });

  it("follows catalogue changes", async () => {
    await createProduct({ offers: [{ competitor: "cmp_idle", price: "3.00" }] });
    await publishSnapshot();
    const body = await expectJson(await call("GET", "/competitors", { token: key }), 200);
    expect(body.competitors.find((c) => c.id === "cmp_idle")!.offer_count).toBe(1);
  });

  it("refuses query parameters it does not know", async () => {
    expect((await expectJson(await call("GET", "/competitors?page=2", { token: key }), 400)).detail).toMatch(/page/);
  });
});
