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

/** The figures of an offer's row the summary reads. */
type OfferFigures = Pick<OfferRow, "currency" | "inStock" | "competitorId" | "priceMinor" | "shippingMinor">;

/** What the summary looks at in an offer: its row's figures, or its converted ones (src/catalogue/converted.ts). */
export type SummaryRow = Pick<OfferRow, "currency" | "inStock" | "competitorId"> & {
  priceMinor: number | bigint;
  /** price + shipping; null while shipping is unknown. */
  totalMinor: number | bigint | null;
};

export const summaryRow = ({ currency, inStock, competitorId, priceMinor, shippingMinor }: OfferFigures): SummaryRow => ({
  currency,
  inStock,
  competitorId,
  priceMinor,
  totalMinor: totalMinor(priceMinor, shippingMinor),
});

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

/** What an offer costs delivered: its total where shipping is known, else its price. */
const deliveredMinor = (row: SummaryRow) => row.totalMinor ?? row.priceMinor;

/**
 * The lowest offer a buyer can take (docs/decisions.md): in stock, by its total where shipping is known (else its
 * price), among the in-stock offers in the summary's currency, or, when none of those is in stock, in the most common
 * currency of those that are (when converted, every offer is in the one currency). Equal totals: the lower price, then
 * the rows' competitor-id order.
 */
function lowestOffer(rows: readonly SummaryRow[], summaryCurrency: string | null): SummaryView["lowest_offer"] {
  const inStock = rows.filter((row) => row.inStock);
  const currency = inStock.some((row) => row.currency === summaryCurrency) ? summaryCurrency : mainCurrency(inStock);
  let best: SummaryRow | undefined;
  for (const row of inStock) {
    if (row.currency !== currency) continue;
    const [figure, bestFigure] = [deliveredMinor(row), best && deliveredMinor(best)];
    if (!best || figure < bestFigure! || (figure === bestFigure && row.priceMinor < best.priceMinor)) best = row;
  }
  if (!best || currency === null) return null;
  return {
    competitor_id: best.competitorId,
    price: formatMoney(best.priceMinor, currency),
    total_price: best.totalMinor === null ? null : formatMoney(best.totalMinor, currency),
    currency,
  };
}

/** The summary of an offer's rows (D1's, the sandbox's). */
export const summarise = (offers: readonly OfferFigures[]): SummaryView => summariseRows(offers.map(summaryRow));

export function summariseRows(rows: readonly SummaryRow[]): SummaryView {
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
    lowest_offer: lowestOffer(rows, currency),
  };
}
