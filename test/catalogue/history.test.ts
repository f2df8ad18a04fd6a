import { beforeAll, describe, expect, it } from "vitest";
import { HISTORY_LIMIT } from "../../src/catalogue/history.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { addHistory, createCompetitor, createProduct, publishSnapshot } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";

let key: string;
const get = <Path extends string>(path: Path) => call("GET", path, { token: key });
const times = (body: { history: { observed_at: string }[] }) => body.history.map((h) => h.observed_at);

beforeAll(async () => {
  key = (await freshAccount({ plan: "premium" })).key;
  await createCompetitor({ id: "cmp_amazon", name: "Amazon" });
  await createCompetitor({ id: "cmp_argos", name: "Argos" });
  await createProduct({ id: "prd_kettle", sku: "KETTLE" });
  await createProduct({ id: "prd_quiet", sku: "QUIET" });
  // Written out of order: the response must sort them.
  await addHistory("prd_kettle", [
    { competitor: "cmp_amazon", price: "21.00", observedAt: "2026-03-01T00:00:00.000Z" },
    { competitor: "cmp_argos", price: "18.50", currency: "GBP", inStock: false, observedAt: "2026-01-15T00:00:00.000Z" },
    { competitor: "cmp_amazon", price: "19.99", observedAt: "2026-01-01T00:00:00.000Z" },
    { competitor: "cmp_argos", price: "17.25", currency: "GBP", observedAt: "2026-02-01T00:00:00.000Z" },
  ]);
  await publishSnapshot();
});

describe("GET /products/:id/history", () => {
  it("returns the history oldest first, with exact money", async () => {
    const body = await expectJson(await get("/products/prd_kettle/history"), 200);
    expect(body).toEqual({
      product_id: "prd_kettle",
      history: [
        { competitor_id: "cmp_amazon", price: "19.99", currency: "USD", in_stock: true, observed_at: "2026-01-01T00:00:00.000Z" },
        { competitor_id: "cmp_argos", price: "18.50", currency: "GBP", in_stock: false, observed_at: "2026-01-15T00:00:00.000Z" },
        { competitor_id: "cmp_argos", price: "17.25", currency: "GBP", in_stock: true, observed_at: "2026-02-01T00:00:00.000Z" },
        { competitor_id: "cmp_amazon", price: "21.00", currency: "USD", in_stock: true, observed_at: "2026-03-01T00:00:00.000Z" },
      ],
    });
  });

  it("filters by competitor", async () => {
    const body = await expectJson(await get("/products/prd_kettle/history?competitor=cmp_argos"), 200);
    expect(body.history.map((h) => h.competitor_id)).toEqual(["cmp_argos", "cmp_argos"]);
    expect((await expectJson(await get("/products/prd_kettle/history?competitor=nobody"), 200)).history).toEqual([]);
  });

  it("filters by from (inclusive) and to (exclusive)", async () => {
    const from = await expectJson(await get("/products/prd_kettle/history?from=2026-01-15T00:00:00Z"), 200);
    expect(times(from)).toEqual(["2026-01-15T00:00:00.000Z", "2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"]);
    const window = await expectJson(await get("/products/prd_kettle/history?from=2026-01-02&to=2026-03-01"), 200);
    expect(times(window)).toEqual(["2026-01-15T00:00:00.000Z", "2026-02-01T00:00:00.000Z"]);
    const both = await expectJson(await get("/products/prd_kettle/history?competitor=cmp_amazon&to=2026-02-01"), 200);
    expect(times(both)).toEqual(["2026-01-01T00:00:00.000Z"]);
  });

  it("returns an empty history for a product without one", async () => {
    expect(await expectJson(await get("/products/prd_quiet/history"), 200)).toEqual({ product_id: "prd_quiet", history: [] });
  });

  it.each([
    ["from=soon", /from/],
    ["to=2026-02-30", /to/],
    ["from=2026-03-01&to=2026-01-01", /to: must be later than from/],
    ["from=2026-03-01&to=2026-03-01", /to/],
    ["limit=5", /limit/],
  ])("refuses %s with a 400 naming the parameter", async (query, field) => {
    expect((await expectJson(await get(`/products/prd_kettle/history?${query}`), 400)).detail).toMatch(field);
  });

  it("answers 404 for an unknown product", async () => {
    expect((await expectJson(await get("/products/prd_nope/history"), 404)).detail).toContain("prd_nope");
  });

  it(`returns at most ${HISTORY_LIMIT} rows, the oldest, and says it cut`, async () => {
    await createProduct({ id: "prd_busy", sku: "BUSY" });
    const start = Date.parse("2025-01-01T00:00:00.000Z");
    await addHistory(
      "prd_busy",
      Array.from({ length: HISTORY_LIMIT + 1 }, (_, i) => ({
        competitor: "cmp_amazon",
        price: `${i}.00`,
        observedAt: new Date(start + i * 60_000).toISOString(),
      })),
    );
    const res = await get("/products/prd_busy/history");
    const body = await expectJson(res, 200);
    expect(body.history).toHaveLength(HISTORY_LIMIT);
    expect(body.history[0]!.price).toBe("0.00");
    expect(body.history.at(-1)!.price).toBe(`${HISTORY_LIMIT - 1}.00`);
    expect(res.headers.get("X-Result-Truncated")).toBe("true");

    const rest = await get(`/products/prd_busy/history?from=${body.history.at(-1)!.observed_at}`);
    expect((await expectJson(rest, 200)).history).toHaveLength(2);
    expect(rest.headers.get("X-Result-Truncated")).toBeNull();
  });
});
