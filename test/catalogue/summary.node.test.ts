import { describe, expect, it } from "vitest";
import { type OfferRow, summarise } from "../../src/catalogue/views.ts";

type Row = OfferRow;
const offer = (competitorId: string, priceMinor: number, currency = "USD", inStock = true): Row => ({
  productId: "prd_x",
  competitorId,
  url: null,
  priceMinor,
  regularPriceMinor: null,
  currency,
  shippingMinor: null,
  inStock,
  previousPriceMinor: null,
  priceChangedAt: null,
  checkedAt: "2026-01-01T00:00:00.000Z",
  seller: null,
  condition: "new",
  quantity: null,
  unit: null,
  checkStatus: "ok",
  lowestPrice30dMinor: null,
  priorPrices: [],
});

describe("summary", () => {
  it("ranges over the most common currency only", () => {
    expect(summarise([offer("a", 1000, "EUR"), offer("b", 50, "USD"), offer("c", 1200, "EUR", false), offer("d", 900_000, "JPY")])).toEqual(
      {
        min_price: "10.00",
        max_price: "12.00",
        currency: "EUR",
        offer_count: 4,
        in_stock_count: 3,
        lowest_competitor_id: "a",
      },
    );
  });

  it("breaks a currency tie by code, so the choice never flips between builds", () => {
    expect(summarise([offer("a", 100, "USD"), offer("b", 100, "GBP")]).currency).toBe("GBP");
    expect(summarise([offer("b", 100, "GBP"), offer("a", 100, "USD")]).currency).toBe("GBP");
  });

  it("counts out-of-stock offers in the range, but prefers one in stock at an equal lowest price", () => {
    const summary = summarise([offer("a", 500, "USD", false), offer("b", 500), offer("c", 400, "USD", false)]);
    expect(summary).toMatchObject({ min_price: "4.00", max_price: "5.00", lowest_competitor_id: "c", in_stock_count: 1 });
    expect(summarise([offer("a", 500, "USD", false), offer("b", 500)]).lowest_competitor_id).toBe("b");
  });

  it("is empty without offers", () => {
    expect(summarise([])).toEqual({
      min_price: null,
      max_price: null,
      currency: null,
      offer_count: 0,
      in_stock_count: 0,
      lowest_competitor_id: null,
    });
  });
});
