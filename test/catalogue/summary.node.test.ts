import { describe, expect, it } from "vitest";
import { type OfferRow, summarise } from "../../src/catalogue/views.ts";

type Row = OfferRow;
const offer = (competitorId: string, priceMinor: number, currency = "USD", inStock = true, shippingMinor: number | null = null): Row => ({
  productId: "prd_x",
  competitorId,
  url: null,
  priceMinor,
  regularPriceMinor: null,
  currency,
  shippingMinor,
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
        lowest_offer: { competitor_id: "a", price: "10.00", total_price: null, currency: "EUR" },
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

  it("lowest_offer: in stock only, by the total where shipping is known, among the in-stock offers' most common currency", () => {
    // min_price is the out-of-stock 4.00; the cheapest to buy is b's 5.00 + 0.50 shipping: below c's 5.60 (shipping
    // unknown, so its price) and d's 4.50 + 2.00.
    const summary = summarise([
      offer("a", 400, "USD", false),
      offer("b", 500, "USD", true, 50),
      offer("c", 560, "USD", true),
      offer("d", 450, "USD", true, 200),
    ]);
    expect(summary).toMatchObject({ min_price: "4.00", lowest_competitor_id: "a" });
    expect(summary.lowest_offer).toEqual({ competitor_id: "b", price: "5.00", total_price: "5.50", currency: "USD" });
    // Equal totals: the lower price; none in stock: null.
    expect(summarise([offer("a", 500, "USD", true, 100), offer("b", 550, "USD", true, 50)]).lowest_offer?.competitor_id).toBe("a");
    expect(summarise([offer("a", 500, "USD", false)]).lowest_offer).toBeNull();
    // The summary's currency is the offers' most common; lowest_offer's, the most common of those in stock.
    const mixed = summarise([offer("a", 100, "EUR", false), offer("b", 200, "EUR", false), offer("c", 900, "USD")]);
    expect(mixed).toMatchObject({ currency: "EUR", min_price: "1.00" });
    expect(mixed.lowest_offer).toEqual({ competitor_id: "c", price: "9.00", total_price: null, currency: "USD" });
  });

  it("is empty without offers", () => {
    expect(summarise([])).toEqual({
      min_price: null,
      max_price: null,
      currency: null,
      offer_count: 0,
      in_stock_count: 0,
      lowest_competitor_id: null,
      lowest_offer: null,
    });
  });
});
