import type { ArchivedHistoryRow } from "../catalogue/history-archive.ts";
import type { OfferRow, ProductRow } from "../catalogue/views.ts";
import { outboxRows } from "../events/outbox-rows.ts";
import { RETENTION_MS } from "../events/retention.ts";
import { ApiError } from "../http/errors.ts";
import type { IngestionChanges, TouchedRows } from "../observations/changes.ts";
import type { Observation } from "../observations/schema.ts";
import type { ObservationStore } from "../observations/service.ts";
import type { Database } from "../platform/db.ts";
import { insertRows } from "../platform/json-rows.ts";
import { events } from "../platform/tables.ts";
import { SANDBOX_SKU_PREFIX, type SandboxBase, sandboxBase } from "./catalogue.ts";
import { sandboxHistory, sandboxProducts } from "./tables.ts";

/**
 * An account's sandbox: the generated base (src/sandbox/catalogue.ts) with the account's own changes laid over it.
 * A changed product is stored whole (its row and offers) in `sandbox_products`, so a read replaces the base's product
 * with it, and a change costs the rows of the products it touches, whatever the account changed before.
 */

export interface ProductState {
  product: ProductRow;
  offers: OfferRow[];
}

/** An account's changed product as stored: its row, and only the offers the account changed or added. */
export interface OverlayRow extends ProductState {
  version: number;
}

/** The account's changed products, by id: every one (a list), or those named (`productIds`). One statement. */
export async function readOverlay(db: Database, accountId: string, productIds?: readonly string[]): Promise<Map<string, OverlayRow>> {
  const named = productIds === undefined ? "" : " AND product_id IN (SELECT value FROM json_each(?))";
  const statement = db.$client.prepare(`SELECT product_id, version, state FROM sandbox_products WHERE account_id = ?${named}`);
  const { results } = await (productIds === undefined
    ? statement.bind(accountId)
    : statement.bind(accountId, JSON.stringify(productIds))
  ).all<{ product_id: string; version: number; state: string }>();
  return new Map(results.map((row) => [row.product_id, { version: row.version, ...(JSON.parse(row.state) as ProductState) }]));
}

/** The account's own history rows of these products, oldest first: within [from, to), of one shop when named (one statement). */
export async function readOwnHistory(
  db: Database,
  accountId: string,
  productIds: readonly string[],
  { from = "", to = "9", competitor = null, limit = -1 }: { from?: string; to?: string; competitor?: string | null; limit?: number } = {},
): Promise<(ArchivedHistoryRow & { productId: string })[]> {
  const { results } = await db.$client
    .prepare(
      `SELECT id, product_id AS productId, competitor_id AS competitorId, price_minor AS priceMinor, currency, in_stock AS inStock,
         observed_at AS observedAt
       FROM sandbox_history WHERE account_id = ? AND product_id IN (SELECT value FROM json_each(?))
         AND observed_at >= ? AND observed_at < ? AND (? IS NULL OR competitor_id = ?)
       ORDER BY observed_at, id LIMIT ?`,
    )
    .bind(accountId, JSON.stringify(productIds), from, to, competitor, competitor, limit)
    .all<ArchivedHistoryRow & { productId: string }>();
  return results.map((row) => ({ ...row, inStock: Boolean(row.inStock) }));
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

/**
 * Fails (a CHECK violation on catalogue_state, as the live guard: src/observations/write.ts) when a product read has
 * another version now: another change to it committed since the read.
 */
const GUARD = `INSERT INTO catalogue_state (id, version, updated_at) SELECT 0, 0, '' WHERE EXISTS (
  SELECT 1 FROM json_each(?) AS seen LEFT JOIN sandbox_products s ON s.account_id = ? AND s.product_id = seen.value ->> 0
  WHERE coalesce(s.version, 0) <> seen.value ->> 1)`;

/** The account's sandbox as an ingestion's store: the same steps as the catalogue's (src/observations/service.ts). */
export function sandboxStore(db: Database, accountId: string): ObservationStore {
  const base = sandboxBase();
  let versions = new Map<string, number>();
  let stored = new Map<string, OverlayRow>();
  return {
    async read(observations) {
      const ids = [...new Set(observations.map((o) => base.products[base.bySku.get(o.sku)!]!.id))];
      const overlay = await readOverlay(db, accountId, ids);
      stored = overlay;
      versions = new Map(ids.map((id) => [id, overlay.get(id)?.version ?? 0]));
      const states = ids.map((id) => productState(base, overlay, base.byId.get(id)!));
      const shops = new Set(observations.map((o) => o.competitor.id));
      return {
        products: states.map((state) => state.product),
        offers: states.flatMap((state) => state.offers),
        competitors: base.competitors.filter((c) => shops.has(c.id)),
      } satisfies TouchedRows;
    },
    async write(touched, changes: IngestionChanges) {
      for (const message of changes.events) message.sandbox_account_id = accountId;
      const touchedIds = new Set([...changes.products.map((p) => p.id), ...changes.offers.map((o) => o.productId)]);
      const rows = [...touchedIds].map((id) => {
        const product = changes.products.find((p) => p.id === id) ?? touched.products.find((p) => p.id === id)!;
        const changed = changes.offers.filter((offer) => offer.productId === id);
        const state: ProductState = { product, offers: mergedOffers(stored.get(id)?.offers ?? [], changed) };
        return { accountId, productId: id, version: versions.get(id)! + 1, state: JSON.stringify(state) };
      });
      const d1 = db.$client;
      const statements = [
        d1.prepare(GUARD).bind(JSON.stringify([...versions]), accountId),
        ...insertRows(d1, { table: sandboxProducts, rows, conflict: { target: ["account_id", "product_id"], update: true } }),
      ];
      if (changes.history.length > 0)
        statements.push(...insertRows(d1, { table: sandboxHistory, rows: changes.history.map((row) => ({ ...row, accountId })) }));
      // Claimed as they are stored: the route's first delivery fans them out before it answers (what the account's test-delivery
      // budget held back is in its answer), and the queue's copy is acked unsent; should that delivery fail, its claim lapses.
      const now = new Date().toISOString();
      if (changes.events.length > 0)
        statements.push(
          ...insertRows(d1, { table: events, rows: outboxRows(changes.events, now).map((row) => ({ ...row, claimedAt: now })) }),
        );
      await d1.batch(statements);
    },
    committed: async () => {},
  };
}

/** One product's offers with `over` in place of those of the same shops (a new shop's joins), in competitor order. */
function mergedOffers(under: readonly OfferRow[], over: readonly OfferRow[]): OfferRow[] {
  const byCompetitor = new Map(under.map((o) => [o.competitorId, o]));
  for (const offer of over) byCompetitor.set(offer.competitorId, offer);
  return [...byCompetitor.values()].sort((a, b) => (a.competitorId < b.competitorId ? -1 : 1));
}

/** Sandbox history rows the cron deletes a run, oldest first. */
const EXPIRED_PER_RUN = 1000;

/**
 * The cron's retention for the accounts' own history rows: those older than the events' 30 days go (a sandbox's
 * history is its last 30 days; its events leave with the outbox's sweep), EXPIRED_PER_RUN a run, through their time index.
 */
export async function expireSandboxHistory(db: Database, now = Date.now()): Promise<number> {
  const result = await db.$client
    .prepare("DELETE FROM sandbox_history WHERE id IN (SELECT id FROM sandbox_history WHERE observed_at < ? ORDER BY observed_at LIMIT ?)")
    .bind(new Date(now - RETENTION_MS).toISOString(), EXPIRED_PER_RUN)
    .run();
  return result.meta.changes;
}
