import type { OfferRow, ProductRow } from "../catalogue/views.ts";
import { ApiError } from "../http/errors.ts";
import { invalidField } from "../http/validation.ts";
import type { Observation } from "../observations/schema.ts";
import { SANDBOX_SKU_PREFIX, type SandboxBase } from "./catalogue.ts";
import { PRODUCT_LINES } from "./world.ts";

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

/** A sandbox SKU's form: TEST-, a product line's code, its number (TEST-CF-0001). */
const SANDBOX_SKU_FORM = new RegExp(`^${SANDBOX_SKU_PREFIX}(${PRODUCT_LINES.map((line) => line.code).join("|")})-\\d{4}$`);

/** Why a SKU is not one of the sandbox's, so a person can tell a typo from a product the sandbox has not got. */
function notSandboxSku(sku: string): string {
  if (!sku.startsWith(SANDBOX_SKU_PREFIX)) return `${JSON.stringify(sku)} does not begin ${SANDBOX_SKU_PREFIX}`;
  if (!SANDBOX_SKU_FORM.test(sku)) return `${JSON.stringify(sku)} is not of the form ${SANDBOX_SKU_PREFIX}<line code>-<4 digits>`;
  return `${JSON.stringify(sku)} has the form, but no sandbox product has it`;
}

/** The observations' SKUs that are not the sandbox's, and competitor ids that are not its shops: a 400 naming them. */
export function checkSandboxObservations(base: SandboxBase, observations: readonly Observation[]): void {
  const first = observations.findIndex((o) => !base.bySku.has(o.sku));
  const skus = [...new Set(observations.map((o) => o.sku).filter((sku) => !base.bySku.has(sku)))];
  if (skus.length > 0)
    throw invalidField("body", {
      field: `observations.${first}.sku`,
      message:
        `not a sandbox product: ${skus.slice(0, 10).map(notSandboxSku).join("; ")}` +
        `${skus.length > 10 ? `; and ${skus.length - 10} more` : ""}. A test key changes only its sandbox's ` +
        `${base.products.length.toLocaleString("en")} products, which it cannot add to: their SKUs are ${SANDBOX_SKU_PREFIX}, the code ` +
        `of the product's line (${PRODUCT_LINES.map((line) => line.code).join(", ")}) and a number up to ` +
        `${base.products.length} that belongs to one line only, e.g. ${base.products[0]!.sku} or ${base.products[1]!.sku}; ` +
        "GET /products with the test key lists them (?sku= finds one).",
    });
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
