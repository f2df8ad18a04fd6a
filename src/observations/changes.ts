import type { CompetitorRow, OfferRow, ProductRow } from "../catalogue/views.ts";
import type { EventMessage } from "../events/messages.ts";
import type { ApiError } from "../http/errors.ts";
import { invalidField } from "../http/validation.ts";
import { newId } from "../platform/ids.ts";
import { parseMoney } from "../platform/money.ts";
import type { priceHistory } from "../platform/tables.ts";
import { priceEvent, stockEvent } from "./events.ts";
import { afterPriceChange } from "./prior-prices.ts";
import { type IngestionResult, isFailedCheck, type Observation, type PricedObservation } from "./schema.ts";

/** Step 2 of an ingestion (src/observations/service.ts): the observations applied in memory to what they touch. */

type HistoryRow = Omit<typeof priceHistory.$inferSelect, "id">;

/** What the observations touch, as read in one batch. */
export interface TouchedRows {
  products: ProductRow[];
  offers: OfferRow[];
  competitors: CompetitorRow[];
}

/** The rows to write and the events to emit. */
export interface IngestionChanges {
  result: IngestionResult;
  /** The competitors to create. */
  competitors: CompetitorRow[];
  /** Every competitor the observations name, as the changes used it (the write guards that it is still so). */
  competitorsUsed: CompetitorRow[];
  products: ProductRow[];
  offers: OfferRow[];
  history: HistoryRow[];
  events: EventMessage[];
}

const offerKey = (productId: string, competitorId: string) => `${productId}\u0000${competitorId}`;
const minor = (amount: string | null | undefined, currency: string) => (amount == null ? null : parseMoney(amount, currency));

/** The offer's fields beside price and stock whose change changes its view (and the product's updated_at). */
const DETAILS = ["url", "regularPriceMinor", "shippingMinor", "seller", "condition", "quantity", "unit", "checkStatus"] as const;

/** Prices in another currency cannot be compared: a change of currency starts the offer's prior prices afresh. */
function priorPricesAfter(before: OfferRow, currency: string, changedAt: string): Pick<OfferRow, "priorPrices" | "lowestPrice30dMinor"> {
  if (before.currency !== currency) return { priorPrices: [], lowestPrice30dMinor: null };
  const { priorPrices, lowestMinor } = afterPriceChange(before.priorPrices, before.priceMinor, changedAt);
  return { priorPrices, lowestPrice30dMinor: lowestMinor };
}

/** A failed check only updates an offer: one not known yet has no price to keep. */
function unknownOfferCheck(observation: { index?: number; sku: string }, competitorId: string): ApiError {
  return invalidField("body", {
    field: `observations.${observation.index ?? 0}.check_status`,
    message:
      `${JSON.stringify(observation.sku)} has no offer from ${JSON.stringify(competitorId)} yet, so a failed check has nothing to ` +
      "update; send its first observation with a price (check_status ok)",
  });
}

/** Product details: the first observation of a product sets them; later ones only fill in what is missing. */
const FILLABLE = ["brand", "category", "gtin", "mpn"] as const;

export function computeChanges(
  touched: TouchedRows,
  /** `index`: the observation's place in the request, for a 400's field path. */
  observations: readonly (Observation & { observed_at: string; index?: number })[],
  now: string,
): IngestionChanges {
  const result: IngestionResult = {
    received: observations.length,
    products_created: 0,
    offers_created: 0,
    price_changes: 0,
    stock_changes: 0,
  };
  const productsBySku = new Map(touched.products.map((row) => [row.sku, { ...row }]));
  const offersByKey = new Map(touched.offers.map((row) => [offerKey(row.productId, row.competitorId), { ...row }]));
  const competitorsById = new Map(touched.competitors.map((row) => [row.id, { ...row }]));
  const changed = { products: new Set<ProductRow>(), offers: new Set<OfferRow>(), competitors: new Set<CompetitorRow>() };
  const history: HistoryRow[] = [];
  const events: EventMessage[] = [];

  for (const observation of observations) {
    const competitor = competitorOf(competitorsById, observation.competitor, changed.competitors);

    let product = productsBySku.get(observation.sku);
    if (!product) {
      product = {
        id: newId("prd"),
        sku: observation.sku,
        name: observation.name,
        brand: null,
        category: null,
        gtin: null,
        mpn: null,
        url: null,
        imageUrl: null,
        createdAt: now,
        updatedAt: now,
        lastChangedAt: null,
        changedVersion: 0, // marked with its batch's version in the write
      };
      productsBySku.set(product.sku, product);
      changed.products.add(product);
      result.products_created++;
    }
    for (const field of FILLABLE) {
      const value = observation[field];
      if (product[field] === null && value != null) {
        product[field] = value;
        product.updatedAt = now;
        changed.products.add(product);
      }
    }

    const key = offerKey(product.id, competitor.id);
    const offer = offersByKey.get(key);
    const observedAt = observation.observed_at;
    if (isFailedCheck(observation)) {
      if (!offer) throw unknownOfferCheck(observation, competitor.id);
      if (observedAt <= offer.checkedAt) continue; // stale, or a replay
      // A failed check read no price: only how the check went, and when, change (no history, no event).
      if (offer.checkStatus !== observation.check_status) {
        product.updatedAt = now;
        changed.products.add(product);
      }
      Object.assign(offer, { checkStatus: observation.check_status, checkedAt: observedAt });
      changed.offers.add(offer);
      continue;
    }
    const priced = observation as typeof observation & PricedObservation;
    const { currency } = priced;
    const next = {
      url: observation.url ?? null,
      priceMinor: parseMoney(priced.price, currency),
      regularPriceMinor: minor(priced.regular_price, currency),
      currency,
      shippingMinor: minor(priced.shipping_cost, currency),
      inStock: priced.in_stock,
      seller: priced.seller ?? null,
      condition: priced.condition ?? "new",
      quantity: priced.quantity ?? null,
      unit: priced.unit ?? null,
      checkStatus: "ok" as const,
    };
    if (!offer) {
      const created: OfferRow = {
        productId: product.id,
        competitorId: competitor.id,
        ...next,
        previousPriceMinor: null,
        priceChangedAt: null,
        checkedAt: observedAt,
        lowestPrice30dMinor: null,
        priorPrices: [],
      };
      offersByKey.set(key, created);
      changed.offers.add(created);
      history.push(historyRow(created));
      product.updatedAt = now;
      changed.products.add(product);
      result.offers_created++;
      continue;
    }
    if (observedAt <= offer.checkedAt) continue; // stale, or a replay

    const before = { ...offer };
    const priceChanged = offer.priceMinor !== next.priceMinor || offer.currency !== next.currency;
    const stockChanged = offer.inStock !== next.inStock;
    // A check that is ok again after a failed one changes the status only: the price and stock compare with the last known.
    const detailsChanged = DETAILS.some((field) => offer[field] !== next[field]);
    Object.assign(offer, next, { checkedAt: observedAt });
    if (priceChanged) {
      offer.previousPriceMinor = before.currency === next.currency ? before.priceMinor : null;
      offer.priceChangedAt = observedAt;
      Object.assign(offer, priorPricesAfter(before, next.currency, observedAt));
    }
    changed.offers.add(offer);
    if (priceChanged || stockChanged) {
      history.push(historyRow(offer));
      if (product.lastChangedAt === null || product.lastChangedAt < observedAt) product.lastChangedAt = observedAt;
      const context = { product, competitor, offer, now };
      if (priceChanged) {
        events.push(priceEvent(context, before));
        result.price_changes++;
      }
      if (stockChanged) {
        events.push(stockEvent(context, before));
        result.stock_changes++;
      }
    }
    if (priceChanged || stockChanged || detailsChanged) {
      product.updatedAt = now;
      changed.products.add(product);
    }
  }
  return {
    result,
    competitors: [...changed.competitors],
    competitorsUsed: [...competitorsById.values()],
    products: [...changed.products],
    offers: [...changed.offers],
    history,
    events,
  };
}

/**
 * A new competitor takes the observation's name and domain; a stored one keeps its own whatever the
 * observation says (scrapers spell shops differently): only PATCH /admin/competitors/:id renames.
 */
function competitorOf(byId: Map<string, CompetitorRow>, input: Observation["competitor"], created: Set<CompetitorRow>): CompetitorRow {
  let row = byId.get(input.id);
  if (!row) {
    row = { id: input.id, name: input.name, domain: input.domain ?? null };
    byId.set(row.id, row);
    created.add(row);
  }
  return row;
}

const historyRow = (offer: OfferRow): HistoryRow => ({
  productId: offer.productId,
  competitorId: offer.competitorId,
  priceMinor: offer.priceMinor,
  currency: offer.currency,
  inStock: offer.inStock,
  observedAt: offer.checkedAt,
});
