import { totalMinor } from "../catalogue/figures.ts";
import type { CompetitorRow, OfferRow, ProductRow } from "../catalogue/views.ts";
import type { EventMessage } from "../events/messages.ts";
import type { PriceChangedData, StockChangedData } from "../events/schema.ts";
import { newEventId } from "../platform/ids.ts";
import { formatMoney, MAX_MINOR_UNITS } from "../platform/money.ts";

/** The events an ingestion emits, built as the types src/events/schema.ts declares. */

export interface EventContext {
  product: ProductRow;
  competitor: CompetitorRow;
  offer: OfferRow;
  now: string;
}

type OfferFields = "event_id" | "product_id" | "sku" | "name" | "competitor_id" | "competitor_name" | "url" | "currency" | "observed_at";

function eventMessage<D extends PriceChangedData | StockChangedData>(
  type: "price.changed" | "stock.changed",
  { product, competitor, offer, now }: EventContext,
  data: Omit<D, OfferFields>,
): EventMessage {
  const id = newEventId(now);
  const payload = {
    event_id: id,
    product_id: product.id,
    sku: product.sku,
    name: product.name,
    competitor_id: competitor.id,
    competitor_name: competitor.name,
    url: offer.url,
    currency: offer.currency,
    ...data,
    observed_at: offer.checkedAt,
  } as D;
  return { kind: "event", event: { id, type, timestamp: now, data: payload } };
}

const money = (minor: number | null, currency: string) => (minor === null ? null : formatMoney(minor, currency));

/**
 * change_abs is new − old (signed, a decimal string); change_pct the same as a percentage of the old
 * price, rounded to 2 decimals (null from a price of 0). When the currency changed, the prices
 * cannot be compared: old_price, change_abs, change_pct and direction are null.
 */
export function priceEvent(context: EventContext, before: OfferRow): EventMessage {
  const { offer } = context;
  const comparable = before.currency === offer.currency;
  const delta = offer.priceMinor - before.priceMinor;
  // A total past 2^53-1 stored before ingestion refused such totals is not shown: the change that mends it still goes through.
  const oldTotal = totalMinor(before.priceMinor, before.shippingMinor);
  const message = eventMessage<PriceChangedData>("price.changed", context, {
    old_price: comparable ? formatMoney(before.priceMinor, offer.currency) : null,
    new_price: formatMoney(offer.priceMinor, offer.currency),
    change_abs: comparable ? formatMoney(delta, offer.currency) : null,
    change_pct: comparable && before.priceMinor > 0 ? Math.round((delta / before.priceMinor) * 10_000) / 100 : null,
    direction: comparable ? (delta > 0 ? "up" : "down") : null,
    old_total_price: comparable && oldTotal !== null && oldTotal <= MAX_MINOR_UNITS ? money(oldTotal, offer.currency) : null,
    new_total_price: money(totalMinor(offer.priceMinor, offer.shippingMinor), offer.currency),
    lowest_price_30d: money(offer.lowestPrice30dMinor, offer.currency),
  });
  message.price_change = comparable ? { old_minor: before.priceMinor, new_minor: offer.priceMinor } : null;
  return message;
}

export function stockEvent(context: EventContext, before: OfferRow): EventMessage {
  const { offer } = context;
  return eventMessage<StockChangedData>("stock.changed", context, {
    price: formatMoney(offer.priceMinor, offer.currency),
    in_stock_before: before.inStock,
    in_stock: offer.inStock,
  });
}
