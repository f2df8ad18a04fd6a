import type { OfferRow, ProductRow } from "../catalogue/views.ts";
import { ApiError } from "../http/errors.ts";
import type { Observation } from "../observations/schema.ts";
import { SANDBOX_SKU_PREFIX, type SandboxBase } from "./catalogue.ts";

/**
 * An account's sandbox: the generated base (src/sandbox/catalogue.ts) with the account's own changes laid over it.
 * A changed product is stored whole (its row and the offers it changed) in the account's object (src/sandbox/object.ts),
 * so a read replaces the base's product with it, and a change costs the rows of the products it touches, whatever the
 * account changed before.
 */

export interface ProductState {
  product: ProductRow;
  offers: OfferRow[];
}

/** An account's changed product as stored: its row, and only the offers the account changed or added. */
export interface OverlayRow extends ProductState {
  version: number;
}

/**
 * A product as the account sees it: the base's, with the account's own offers (those it changed or added) in place of
 * the base's of the same shops, so an offer it never touched keeps following the base's days; the product's row is
 * its own (the times of its latest change, a detail an observation filled in), never older than the base's.
 */
export function productState(base: SandboxBase, overlay: ReadonlyMap<string, OverlayRow>, index: number): ProductState {
  const product = base.products[index]!;
  const offers = base.offers.get(product.id)!;
  const own = overlay.get(product.id);
  if (!own) return { product, offers };
  const later = (a: string | null, b: string | null) => (a === null || (b !== null && b > a) ? b : a);
  return {
    product: {
      ...own.product,
      updatedAt: later(own.product.updatedAt, product.updatedAt)!,
      lastChangedAt: later(own.product.lastChangedAt, product.lastChangedAt),
    },
    offers: mergedOffers(offers, own.offers),
  };
}

/** The observations' SKUs that are not the sandbox's, and competitor ids that are not its shops: a 400 naming them. */
export function checkSandboxObservations(base: SandboxBase, observations: readonly Observation[]): void {
  const skus = [...new Set(observations.map((o) => o.sku).filter((sku) => !base.bySku.has(sku)))];
  if (skus.length > 0)
    throw new ApiError(
      400,
      `Invalid body: observations: not sandbox SKUs: ${skus.slice(0, 10).join(", ")}` +
        `${skus.length > 10 ? ` and ${skus.length - 10} more` : ""}. ` +
        `A test key changes only its sandbox: SKUs that begin "${SANDBOX_SKU_PREFIX}", as GET /products lists them.`,
    );
  const shops = new Set(base.competitors.map((c) => c.id));
  const unknown = [...new Set(observations.map((o) => o.competitor.id).filter((id) => !shops.has(id)))];
  if (unknown.length > 0)
    throw new ApiError(
      400,
      `Invalid body: observations: competitor: not sandbox competitors: ${unknown.slice(0, 10).join(", ")}. ` +
        `The sandbox's are ${[...shops].join(", ")} (GET /competitors).`,
    );
}

/** One product's offers with `over` in place of those of the same shops (a new shop's joins), in competitor order. */
export function mergedOffers(under: readonly OfferRow[], over: readonly OfferRow[]): OfferRow[] {
  const byCompetitor = new Map(under.map((o) => [o.competitorId, o]));
  for (const offer of over) byCompetitor.set(offer.competitorId, offer);
  return [...byCompetitor.values()].sort((a, b) => (a.competitorId < b.competitorId ? -1 : 1));
}
