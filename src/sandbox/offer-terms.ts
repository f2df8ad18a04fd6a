import type { OfferRow } from "../catalogue/views.ts";
import { isFailedCheck, type Observation, type PricedObservation } from "../observations/schema.ts";
import { formatMoney } from "../platform/money.ts";

/**
 * A sandbox change names what changes; the offer keeps the rest. A live observation is the offer as a check read it
 * (a term it leaves out is unknown, so the ingestion clears it), but a person trying out a price drop sends the price
 * and means the offer's page, shipping and seller to stay. So a sandbox observation takes, for each offer term it leaves
 * out (absent; null still clears), the offer's value before it: the offer's current one, or that of an earlier
 * observation of the same offer in the call. Money terms are kept only in the offer's own currency.
 */

type OfferTerms = Pick<
  PricedObservation,
  "url" | "regular_price" | "shipping_cost" | "seller" | "condition" | "quantity" | "unit" | "currency"
>;

const money = (minor: number | null, currency: string) => (minor === null ? null : formatMoney(minor, currency));

const termsOf = (offer: OfferRow): OfferTerms => ({
  url: offer.url,
  regular_price: money(offer.regularPriceMinor, offer.currency),
  shipping_cost: money(offer.shippingMinor, offer.currency),
  seller: offer.seller,
  condition: offer.condition,
  ...(offer.quantity !== null && offer.unit !== null && { quantity: offer.quantity, unit: offer.unit }),
  currency: offer.currency,
});

/** The observations with the terms each leaves out taken from its offer (`offerOf`: the offer now, if there is one). */
export function keepingOfferTerms(
  observations: readonly Observation[],
  offerOf: (sku: string, competitorId: string) => OfferRow | undefined,
): Observation[] {
  const before = new Map<string, OfferTerms>();
  return observations.map((observation) => {
    if (isFailedCheck(observation)) return observation;
    const key = `${observation.sku}\u0000${observation.competitor.id}`;
    const offer = offerOf(observation.sku, observation.competitor.id);
    const kept = before.get(key) ?? (offer && termsOf(offer));
    const priced = observation as PricedObservation;
    const filled: PricedObservation = kept ? { ...priced } : priced;
    if (kept) {
      const sameCurrency = kept.currency === priced.currency;
      filled.url = priced.url === undefined ? kept.url : priced.url;
      filled.seller = priced.seller === undefined ? kept.seller : priced.seller;
      filled.condition = priced.condition ?? kept.condition;
      if (priced.quantity === undefined && priced.unit === undefined && kept.quantity !== undefined)
        Object.assign(filled, { quantity: kept.quantity, unit: kept.unit });
      if (sameCurrency && priced.regular_price === undefined) filled.regular_price = kept.regular_price;
      if (sameCurrency && priced.shipping_cost === undefined) filled.shipping_cost = kept.shipping_cost;
    }
    before.set(key, filled);
    return filled;
  });
}
