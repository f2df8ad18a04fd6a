import { formatMoney } from "../platform/money.ts";
import type { competitors, offers, products } from "../platform/tables.ts";
import { totalMinor, unitPrice } from "./figures.ts";
import type { OfferView, ProductView, SummaryView } from "./schema.ts";

/** Rows to the wire shapes of src/catalogue/schema.ts. */

export type ProductRow = typeof products.$inferSelect;
export type OfferRow = typeof offers.$inferSelect;
export type CompetitorRow = typeof competitors.$inferSelect;

const money = (minor: number | null, currency: string) => (minor === null ? null : formatMoney(minor, currency));

function offerView(row: OfferRow, competitorName: string): OfferView {
  return {
    competitor_id: row.competitorId,
    competitor_name: competitorName,
    url: row.url,
    price: formatMoney(row.priceMinor, row.currency),
    regular_price: money(row.regularPriceMinor, row.currency),
    currency: row.currency,
    shipping_cost: money(row.shippingMinor, row.currency),
    total_price: money(totalMinor(row.priceMinor, row.shippingMinor), row.currency),
    unit_price: unitPrice(row.priceMinor, row.currency, row.quantity, row.unit),
    lowest_price_30d: money(row.lowestPrice30dMinor, row.currency),
    seller: row.seller,
    condition: row.condition,
    in_stock: row.inStock,
    check_status: row.checkStatus,
    previous_price: money(row.previousPriceMinor, row.currency),
    price_changed_at: row.priceChangedAt,
    checked_at: row.checkedAt,
  };
}

/** Offers name their competitor: the builder passes D1's rows, a filtered read the snapshot's list (src/catalogue/filtered.ts). */
export function productView(
  row: ProductRow,
  offerRows: readonly OfferRow[],
  competitorById: ReadonlyMap<string, Pick<CompetitorRow, "name">>,
): ProductView {
  return {
    id: row.id,
    sku: row.sku,
    gtin: row.gtin,
    mpn: row.mpn,
    name: row.name,
    brand: row.brand,
    category: row.category,
    url: row.url,
    image_url: row.imageUrl,
    offers: offerRows.map((offer) => offerView(offer, competitorById.get(offer.competitorId)?.name ?? offer.competitorId)),
    summary: summarise(offerRows),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
    last_changed_at: row.lastChangedAt,
  };
}

/** What the summary looks at in an offer: its row, or its converted price (src/catalogue/converted.ts). */
export type SummaryRow = Pick<OfferRow, "currency" | "inStock" | "competitorId"> & { priceMinor: number | bigint };

/** The most common currency; ties go to the alphabetically first code, so the choice is stable. */
function mainCurrency(rows: readonly SummaryRow[]): string | null {
  const counts = new Map<string, number>();
  for (const row of rows) counts.set(row.currency, (counts.get(row.currency) ?? 0) + 1);
  let best: string | null = null;
  for (const [currency, count] of counts) {
    const bestCount = best === null ? 0 : counts.get(best)!;
    if (count > bestCount || (count === bestCount && currency < best!)) best = currency;
  }
  return best;
}

export function summarise(rows: readonly SummaryRow[]): SummaryView {
  const currency = mainCurrency(rows);
  let lowest: SummaryRow | undefined;
  let highest: SummaryRow | undefined;
  for (const row of rows) {
    if (row.currency !== currency) continue;
    // Equal prices: an offer in stock beats one that is not; then the rows' competitor-id order.
    if (!lowest || row.priceMinor < lowest.priceMinor || (row.priceMinor === lowest.priceMinor && row.inStock && !lowest.inStock))
      lowest = row;
    if (!highest || row.priceMinor > highest.priceMinor) highest = row;
  }
  return {
    min_price: lowest && currency ? formatMoney(lowest.priceMinor, currency) : null,
    max_price: highest && currency ? formatMoney(highest.priceMinor, currency) : null,
    currency,
    offer_count: rows.length,
    in_stock_count: rows.filter((row) => row.inStock).length,
    lowest_competitor_id: lowest?.competitorId ?? null,
  };
}
