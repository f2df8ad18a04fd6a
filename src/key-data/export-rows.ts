import type { ArchivedHistoryRow } from "../catalogue/history-archive.ts";
import type { ProductView } from "../catalogue/schema.ts";
import type { FeedEvent } from "../events/schema.ts";
import type { Column, Row } from "../exports/files.ts";
import { derivedEventId } from "../platform/ids.ts";
import { formatMoney, parseMoney } from "../platform/money.ts";

/**
 * What one row of an export holds: the catalogue's (one per offer, with its product's fields, exactly as GET /products
 * serves them, flattened) and the changes' (one per price.changed or stock.changed event, as GET /events serves it,
 * with the product's sku, brand and category beside it).
 */

export const CATALOGUE_COLUMNS: readonly Column[] = [
  { name: "product_id", type: "string" },
  { name: "sku", type: "string" },
  { name: "gtin", type: "string" },
  { name: "mpn", type: "string" },
  { name: "name", type: "string" },
  { name: "brand", type: "string" },
  { name: "category", type: "string" },
  { name: "product_url", type: "string" },
  { name: "image_url", type: "string" },
  { name: "created_at", type: "timestamp" },
  { name: "updated_at", type: "timestamp" },
  { name: "last_changed_at", type: "timestamp" },
  { name: "summary_currency", type: "string" },
  { name: "summary_min_price", type: "money", currency: "summary_currency" },
  { name: "summary_max_price", type: "money", currency: "summary_currency" },
  { name: "summary_offer_count", type: "int" },
  { name: "summary_in_stock_count", type: "int" },
  { name: "summary_lowest_competitor_id", type: "string" },
  { name: "competitor_id", type: "string" },
  { name: "competitor_name", type: "string" },
  { name: "offer_url", type: "string" },
  { name: "currency", type: "string" },
  { name: "price", type: "money", currency: "currency" },
  { name: "regular_price", type: "money", currency: "currency" },
  { name: "shipping_cost", type: "money", currency: "currency" },
  { name: "total_price", type: "money", currency: "currency" },
  { name: "unit_price_amount", type: "money", currency: "currency" },
  { name: "unit_price_per", type: "string" },
  { name: "lowest_price_30d", type: "money", currency: "currency" },
  { name: "seller", type: "string" },
  { name: "condition", type: "string" },
  { name: "in_stock", type: "bool" },
  { name: "check_status", type: "string" },
  { name: "previous_price", type: "money", currency: "currency" },
  { name: "price_changed_at", type: "timestamp" },
  { name: "checked_at", type: "timestamp" },
];

/** A product's rows: one per offer; a product without offers is one row whose offer columns are null. */
export function catalogueRows(product: ProductView): Row[] {
  const fields: Row = {
    product_id: product.id,
    sku: product.sku,
    gtin: product.gtin,
    mpn: product.mpn,
    name: product.name,
    brand: product.brand,
    category: product.category,
    product_url: product.url,
    image_url: product.image_url,
    created_at: product.created_at,
    updated_at: product.updated_at,
    last_changed_at: product.last_changed_at,
    summary_currency: product.summary.currency,
    summary_min_price: product.summary.min_price,
    summary_max_price: product.summary.max_price,
    summary_offer_count: product.summary.offer_count,
    summary_in_stock_count: product.summary.in_stock_count,
    summary_lowest_competitor_id: product.summary.lowest_competitor_id,
  };
  if (product.offers.length === 0) return [fields];
  return product.offers.map((offer) => ({
    ...fields,
    competitor_id: offer.competitor_id,
    competitor_name: offer.competitor_name,
    offer_url: offer.url,
    currency: offer.currency,
    price: offer.price,
    regular_price: offer.regular_price,
    shipping_cost: offer.shipping_cost,
    total_price: offer.total_price,
    unit_price_amount: offer.unit_price?.amount ?? null,
    unit_price_per: offer.unit_price?.per ?? null,
    lowest_price_30d: offer.lowest_price_30d,
    seller: offer.seller,
    condition: offer.condition,
    in_stock: offer.in_stock,
    check_status: offer.check_status,
    previous_price: offer.previous_price,
    price_changed_at: offer.price_changed_at,
    checked_at: offer.checked_at,
  }));
}

export const CHANGE_COLUMNS: readonly Column[] = [
  { name: "event_id", type: "string" },
  { name: "type", type: "string" },
  { name: "timestamp", type: "timestamp" },
  { name: "observed_at", type: "timestamp" },
  { name: "product_id", type: "string" },
  { name: "sku", type: "string" },
  { name: "name", type: "string" },
  { name: "brand", type: "string" },
  { name: "category", type: "string" },
  { name: "competitor_id", type: "string" },
  { name: "competitor_name", type: "string" },
  { name: "url", type: "string" },
  { name: "currency", type: "string" },
  { name: "old_price", type: "money", currency: "currency" },
  { name: "new_price", type: "money", currency: "currency" },
  { name: "change_abs", type: "money", currency: "currency" },
  { name: "change_pct", type: "double" },
  { name: "direction", type: "string" },
  { name: "shipping_cost", type: "money", currency: "currency" },
  { name: "old_total_price", type: "money", currency: "currency" },
  { name: "new_total_price", type: "money", currency: "currency" },
  { name: "lowest_price_30d", type: "money", currency: "currency" },
  { name: "price", type: "money", currency: "currency" },
  { name: "in_stock_before", type: "bool" },
  { name: "in_stock", type: "bool" },
  { name: "source", type: "string" },
];

/** The product fields a change row carries beside its event's. */
export interface ProductFields {
  brand: string | null;
  category: string | null;
}

/** shipping = new total − new price, in the currency's minor units (the platform's money arithmetic); null while unknown. */
function shippingOf(price: string, total: string | null | undefined, currency: string): string | null {
  if (total === null || total === undefined) return null;
  return formatMoney(parseMoney(total, currency) - parseMoney(price, currency), currency);
}

/** One event as a change row. */
export function changeRow(event: FeedEvent, product: ProductFields | undefined): Row {
  const { data } = event;
  const common: Row = {
    event_id: event.id,
    type: event.type,
    timestamp: event.timestamp,
    observed_at: data.observed_at,
    product_id: data.product_id,
    sku: data.sku,
    name: data.name,
    brand: product?.brand ?? null,
    category: product?.category ?? null,
    competitor_id: data.competitor_id,
    competitor_name: data.competitor_name,
    url: data.url,
    currency: data.currency,
    source: "feed",
  };
  if (event.type === "stock.changed") {
    return { ...common, price: event.data.price, in_stock_before: event.data.in_stock_before, in_stock: event.data.in_stock };
  }
  const price = event.data;
  return {
    ...common,
    old_price: price.old_price,
    new_price: price.new_price,
    change_abs: price.change_abs,
    change_pct: price.change_pct,
    direction: price.direction,
    shipping_cost: shippingOf(price.new_price, price.new_total_price, price.currency),
    old_total_price: price.old_total_price ?? null,
    new_total_price: price.new_total_price ?? null,
    lowest_price_30d: price.lowest_price_30d ?? null,
    price: price.new_price,
  };
}

/**
 * An offer's changes in its price history from `since` on, as the ingestion emitted them (src/observations/events.ts):
 * a row whose price or currency differs from the offer's row before it is a price.changed, whose stock differs a
 * stock.changed. `history` is the product's rows, oldest first; an offer's first row (its creation) is no change.
 */
export async function historyChanges(
  product: ProductView,
  history: readonly ArchivedHistoryRow[],
  { since, competitorNames }: { since: string; competitorNames: ReadonlyMap<string, string> },
): Promise<Row[]> {
  const last = new Map<string, ArchivedHistoryRow>();
  const rows: Row[] = [];
  for (const row of history) {
    const before = last.get(row.competitorId);
    last.set(row.competitorId, row);
    if (!before || row.observedAt < since) continue;
    const offer = product.offers.find((o) => o.competitor_id === row.competitorId);
    const common = async (type: string): Promise<Row> => ({
      event_id: await derivedEventId(`history:${type}:${product.id}:${row.competitorId}:${row.id}`),
      type,
      timestamp: row.observedAt,
      observed_at: row.observedAt,
      product_id: product.id,
      sku: product.sku,
      name: product.name,
      brand: product.brand,
      category: product.category,
      competitor_id: row.competitorId,
      competitor_name: competitorNames.get(row.competitorId) ?? offer?.competitor_name ?? null,
      url: offer?.url ?? null,
      currency: row.currency,
      source: "history",
    });
    if (before.priceMinor !== row.priceMinor || before.currency !== row.currency) {
      const comparable = before.currency === row.currency;
      const delta = row.priceMinor - before.priceMinor;
      rows.push({
        ...(await common("price.changed")),
        old_price: comparable ? formatMoney(before.priceMinor, row.currency) : null,
        new_price: formatMoney(row.priceMinor, row.currency),
        change_abs: comparable ? formatMoney(delta, row.currency) : null,
        change_pct: comparable && before.priceMinor > 0 ? Math.round((delta / before.priceMinor) * 10_000) / 100 : null,
        direction: comparable ? (delta > 0 ? "up" : "down") : null,
        price: formatMoney(row.priceMinor, row.currency),
      });
    }
    if (before.inStock !== row.inStock) {
      rows.push({
        ...(await common("stock.changed")),
        price: formatMoney(row.priceMinor, row.currency),
        in_stock_before: before.inStock,
        in_stock: row.inStock,
      });
    }
  }
  return rows;
}
