import { filterSet, rowMatcher } from "../catalogue/filtered.ts";
import { HISTORY_LIMIT, type HistoryPage, historyEntryView, unknownProduct } from "../catalogue/history.ts";
import { type ArchivedHistoryRow, mergeHistory } from "../catalogue/history-archive.ts";
import type { CompetitorView, HistoryQuery, ProductFilters } from "../catalogue/schema.ts";
import { productView } from "../catalogue/views.ts";
import type { Database } from "../platform/db.ts";
import { sha256Hex } from "../platform/hash.ts";
import { baseHistory, type SandboxBase, sandboxBase } from "./catalogue.ts";
import { type OverlayRow, type ProductState, productState, readOverlay } from "./overlay.ts";

/**
 * A test key's catalogue reads: its account's sandbox, through the catalogue's own view builders (src/catalogue/views.ts),
 * so its products have the live wire shape. A list reads the account's overlay in one statement (its rows: the products
 * the account changed) and nothing else; the base is the isolate's.
 */

const encoder = new TextEncoder();
const names = (base: SandboxBase) => new Map(base.competitors.map((c) => [c.id, { name: c.name }]));

/** The base products' JSON, serialised once per base (an hour, per isolate). */
const baseJson = new WeakMap<SandboxBase, string[]>();
function baseLines(base: SandboxBase): string[] {
  let lines = baseJson.get(base);
  if (!lines) {
    const competitorNames = names(base);
    lines = base.products.map((product) => JSON.stringify(productView(product, base.offers.get(product.id)!, competitorNames)));
    baseJson.set(base, lines);
  }
  return lines;
}

export interface SandboxCatalogue {
  base: SandboxBase;
  overlay: Map<string, OverlayRow>;
  /** Names what the account's sandbox holds now: the base's hour and the versions of its changed products. */
  id: string;
}

/** The account's sandbox as a list reads it: the base and every product the account changed (one statement). */
export async function sandboxCatalogue(db: Database, accountId: string): Promise<SandboxCatalogue> {
  const base = sandboxBase();
  const overlay = await readOverlay(db, accountId);
  const versions = [...overlay].map(([id, row]) => `${id}:${row.version}`).sort();
  return { base, overlay, id: `sbx-${base.hour.toString(36)}-${await sha256Hex(versions.join(","), 8)}` };
}

/** GET /products with a test key: the sandbox's products that pass the filters, as `{"products":[…]}` or NDJSON, in id order. */
export async function* sandboxProductList(
  { base, overlay }: SandboxCatalogue,
  filters: ProductFilters,
  form: "json" | "ndjson",
): AsyncGenerator<Uint8Array> {
  const matches = rowMatcher(filterSet(filters));
  const lines = baseLines(base);
  const competitorNames = names(base);
  const order = base.products.map((product, index) => ({ id: product.id, index })).sort((a, b) => (a.id < b.id ? -1 : 1));
  const picked: string[] = [];
  for (const { id, index } of order) {
    const own = overlay.get(id);
    const state = own ?? productState(base, overlay, index);
    if (!matches(state.product, state.offers)) continue;
    picked.push(own ? JSON.stringify(productView(own.product, own.offers, competitorNames)) : lines[index]!);
  }
  yield encoder.encode(form === "json" ? `{"products":[${picked.join(",")}]}` : picked.map((line) => `${line}\n`).join(""));
}

/** The sandbox product, or 404 as for an unknown live product; one statement (the product's own row, if changed). */
async function sandboxProduct(db: Database, accountId: string, id: string): Promise<{ base: SandboxBase; state: ProductState }> {
  const base = sandboxBase();
  const index = base.byId.get(id);
  if (index === undefined) throw unknownProduct(id);
  return { base, state: productState(base, await readOverlay(db, accountId, [id]), index) };
}

/** GET /products/{id} with a test key. */
export async function sandboxProductJson(db: Database, accountId: string, id: string): Promise<string> {
  const { base, state } = await sandboxProduct(db, accountId, id);
  return JSON.stringify(productView(state.product, state.offers, names(base)));
}

/** GET /products/{id}/history with a test key: the generated history and the account's own changes, oldest first. */
export async function sandboxProductHistory(db: Database, accountId: string, id: string, query: HistoryQuery): Promise<HistoryPage> {
  const base = sandboxBase();
  if (!base.byId.has(id)) throw unknownProduct(id);
  const wanted = (row: ArchivedHistoryRow) =>
    (query.competitor === undefined || row.competitorId === query.competitor) &&
    (query.from === undefined || row.observedAt >= query.from) &&
    (query.to === undefined || row.observedAt < query.to);
  const { results } = await db.$client
    .prepare(
      `SELECT id, competitor_id AS competitorId, price_minor AS priceMinor, currency, in_stock AS inStock, observed_at AS observedAt
       FROM sandbox_history WHERE account_id = ? AND product_id = ? AND observed_at >= ? AND observed_at < ?
         AND (? IS NULL OR competitor_id = ?)
       ORDER BY observed_at, id LIMIT ?`,
    )
    .bind(accountId, id, query.from ?? "", query.to ?? "9", query.competitor ?? null, query.competitor ?? null, HISTORY_LIMIT + 1)
    .all<ArchivedHistoryRow>();
  const own = results.map((row) => ({ ...row, inStock: Boolean(row.inStock) }));
  const rows = mergeHistory(baseHistory(base, id).filter(wanted), own);
  return { product_id: id, history: rows.slice(0, HISTORY_LIMIT).map(historyEntryView), truncated: rows.length > HISTORY_LIMIT };
}

/** GET /competitors with a test key: the sandbox's shops and their offer counts, the account's changes included. */
export async function sandboxCompetitors(db: Database, accountId: string): Promise<CompetitorView[]> {
  const { base, overlay } = await sandboxCatalogue(db, accountId);
  const counts = new Map<string, number>();
  base.products.forEach((_, index) => {
    for (const offer of productState(base, overlay, index).offers)
      counts.set(offer.competitorId, (counts.get(offer.competitorId) ?? 0) + 1);
  });
  return base.competitors.map((c) => ({ ...c, offer_count: counts.get(c.id) ?? 0 }));
}
