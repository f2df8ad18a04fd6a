import type { CompetitorRow, OfferRow, ProductRow } from "../catalogue/views.ts";
import type { EventMessage } from "../events/messages.ts";
import { newId } from "../platform/ids.ts";
import { parseMoney } from "../platform/money.ts";
import type { priceHistory } from "../platform/tables.ts";
import { priceEvent, stockEvent } from "./events.ts";
import type { IngestionResult, Observation } from "./schema.ts";

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

/** Product details: the first observation of a product sets them; later ones only fill in what is missing. */
const FILLABLE = ["brand", "category", "gtin", "mpn"] as const;

export function computeChanges(
  touched: TouchedRows,
  observations: readonly (Observation & { observed_at: string })[],
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

    const { currency, observed_at: observedAt } = observation;
    const next = {
      url: observation.url ?? null,
      priceMinor: parseMoney(observation.price, currency),
      regularPriceMinor: minor(observation.regular_price, currency),
      currency,
      shippingMinor: minor(observation.shipping_cost, currency),
      inStock: observation.in_stock,
    };
    const key = offerKey(product.id, competitor.id);
    const offer = offersByKey.get(key);
    if (!offer) {
      const created: OfferRow = {
        productId: product.id,
        competitorId: competitor.id,
        ...next,
        previousPriceMinor: null,
        priceChangedAt: null,
        checkedAt: observedAt,
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
    const detailsChanged =
      offer.url !== next.url || offer.regularPriceMinor !== next.regularPriceMinor || offer.shippingMinor !== next.shippingMinor;
    Object.assign(offer, next, { checkedAt: observedAt });
    if (priceChanged) {
      offer.previousPriceMinor = before.currency === next.currency ? before.priceMinor : null;
      offer.priceChangedAt = observedAt;
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
