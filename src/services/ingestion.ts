import { eq, getTableColumns, getTableName, sql, type AnyColumn, type SQL } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Database } from "../db/client.ts";
import { catalogueState, competitors, offers, priceHistory, products } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { newId } from "../ids.ts";
import { formatMoney, parseMoney } from "../money.ts";
import { sendAll, type EventMessage, type WebhookMessage } from "../webhooks/messages.ts";
import { bumpCatalogueVersion, invalidateCatalogue } from "./catalogue.ts";

/**
 * Price observations in, catalogue changes and events out.
 *
 * 1. Read what the observations touch (products by sku, their offers, the competitors) and the
 *    catalogue version, in one D1 batch.
 * 2. Apply the observations in memory, oldest `observed_at` first, and work out the rows to write
 *    and the events to emit.
 * 3. Write everything in ONE D1 batch (a transaction): a guard that fails unless the catalogue
 *    version is still the one read, the upserts, the history rows, and the version bump. Two
 *    concurrent ingestions therefore never both compute their events against the same old offer: the
 *    later batch fails on its guard, and is read, recomputed and written again (up to 8 times).
 * 4. After the commit, send the events to WEBHOOK_QUEUE (sendBatch, ≤ 100 per call).
 *
 * Ordering: an observation changes an offer only if its `observed_at` is later than the offer's
 * `checked_at`. An older one is stale and a repeated one is a replay: both change nothing and emit
 * nothing. `observed_at` defaults to the time of the request.
 */

export interface Observation {
  sku: string;
  name: string;
  brand?: string | null | undefined;
  category?: string | null | undefined;
  gtin?: string | null | undefined;
  mpn?: string | null | undefined;
  competitor: { id: string; name: string; domain?: string | null | undefined };
  url?: string | null | undefined;
  price: string;
  regular_price?: string | null | undefined;
  currency: string;
  shipping_cost?: string | null | undefined;
  in_stock: boolean;
  observed_at?: string | undefined;
}

export interface IngestionResult {
  received: number;
  products_created: number;
  offers_created: number;
  price_changes: number;
  stock_changes: number;
}

export const MAX_OBSERVATIONS = 1000;
/** Conflicting ingestions retry after a short random pause, so those that collided do not collide again. */
const MAX_WRITE_ATTEMPTS = 8;
const pause = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));

type ProductRow = typeof products.$inferSelect;
type OfferRow = typeof offers.$inferSelect;
type CompetitorRow = typeof competitors.$inferSelect;
type HistoryRow = Omit<typeof priceHistory.$inferSelect, "id">;

interface Snapshot {
  version: number;
  products: ProductRow[];
  offers: OfferRow[];
  competitors: CompetitorRow[];
}

interface Plan {
  result: IngestionResult;
  competitors: CompetitorRow[];
  products: ProductRow[];
  offers: OfferRow[];
  history: HistoryRow[];
  events: EventMessage[];
}

export async function ingestObservations(db: Database, queue: Queue<WebhookMessage>, observations: readonly Observation[]): Promise<IngestionResult> {
  const now = new Date().toISOString();
  const ordered = observations
    .map((observation) => ({ ...observation, observed_at: observation.observed_at ?? now }))
    .sort((a, b) => (a.observed_at < b.observed_at ? -1 : a.observed_at > b.observed_at ? 1 : 0)); // stable: ties keep their order
  for (let attempt = 1; ; attempt++) {
    const snapshot = await readSnapshot(db, ordered);
    const plan = planChanges(snapshot, ordered, now);
    if (plan.offers.length === 0 && plan.products.length === 0 && plan.competitors.length === 0) return plan.result;
    try {
      await writeBatch(db, snapshot.version, plan);
    } catch (error) {
      if (!isVersionConflict(error)) throw error;
      if (attempt < MAX_WRITE_ATTEMPTS) {
        await pause(attempt);
        continue;
      }
      throw new ApiError(503, "The catalogue kept changing during this ingestion; send the same observations again.", { "Retry-After": "1" });
    }
    invalidateCatalogue();
    await sendAll(queue, plan.events);
    return plan.result;
  }
}

// ---- Reading --------------------------------------------------------------------------------------

/** `column IN (the values)`, the values bound as one JSON array (D1 allows 100 parameters a statement). */
const inJson = (column: AnyColumn | SQL, values: readonly string[]) =>
  sql`${column} IN (SELECT value FROM json_each(${JSON.stringify([...new Set(values)])}))`;

async function readSnapshot(db: Database, observations: readonly Observation[]): Promise<Snapshot> {
  const skus = observations.map((o) => o.sku);
  const [version, productRows, offerRows, competitorRows] = await db.batch([
    db.select({ version: catalogueState.version }).from(catalogueState).where(eq(catalogueState.id, 1)),
    db.select().from(products).where(inJson(products.sku, skus)),
    db.select().from(offers).where(sql`${offers.productId} IN (SELECT id FROM products WHERE ${inJson(sql`sku`, skus)})`),
    db.select().from(competitors).where(inJson(competitors.id, observations.map((o) => o.competitor.id))),
  ]);
  return { version: version[0]?.version ?? 0, products: productRows, offers: offerRows, competitors: competitorRows };
}

// ---- Applying, in memory --------------------------------------------------------------------------

const offerKey = (productId: string, competitorId: string) => `${productId}\u0000${competitorId}`;
const minor = (amount: string | null | undefined, currency: string) => (amount == null ? null : parseMoney(amount, currency));

/** Product details: the first observation of a product sets them; later ones only fill in what is missing. */
const FILLABLE = ["brand", "category", "gtin", "mpn"] as const;

function planChanges(snapshot: Snapshot, observations: readonly (Observation & { observed_at: string })[], now: string): Plan {
  const result: IngestionResult = { received: observations.length, products_created: 0, offers_created: 0, price_changes: 0, stock_changes: 0 };
  const productsBySku = new Map(snapshot.products.map((row) => [row.sku, { ...row }]));
  const offersByKey = new Map(snapshot.offers.map((row) => [offerKey(row.productId, row.competitorId), { ...row }]));
  const competitorsById = new Map(snapshot.competitors.map((row) => [row.id, { ...row }]));
  const changed = { products: new Set<ProductRow>(), offers: new Set<OfferRow>(), competitors: new Set<CompetitorRow>() };
  const history: HistoryRow[] = [];
  const events: EventMessage[] = [];

  for (const observation of observations) {
    const competitor = upsertCompetitor(competitorsById, observation.competitor, changed.competitors);

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
      const created: OfferRow = { productId: product.id, competitorId: competitor.id, ...next, previousPriceMinor: null, priceChangedAt: null, checkedAt: observedAt };
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
    const detailsChanged = offer.url !== next.url || offer.regularPriceMinor !== next.regularPriceMinor || offer.shippingMinor !== next.shippingMinor;
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
  return { result, competitors: [...changed.competitors], products: [...changed.products], offers: [...changed.offers], history, events };
}

function upsertCompetitor(byId: Map<string, CompetitorRow>, input: Observation["competitor"], changed: Set<CompetitorRow>): CompetitorRow {
  let row = byId.get(input.id);
  if (!row) {
    row = { id: input.id, name: input.name, domain: input.domain ?? null };
    byId.set(row.id, row);
    changed.add(row);
  } else if (row.name !== input.name || (input.domain !== undefined && row.domain !== input.domain)) {
    row.name = input.name;
    if (input.domain !== undefined) row.domain = input.domain;
    changed.add(row);
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

// ---- Events ---------------------------------------------------------------------------------------

interface EventContext {
  product: ProductRow;
  competitor: CompetitorRow;
  offer: OfferRow;
  now: string;
}

function eventMessage(type: string, { product, competitor, offer, now }: EventContext, data: Record<string, unknown>): EventMessage {
  const id = newId("evt");
  return {
    kind: "event",
    event: {
      id,
      type,
      timestamp: now,
      data: {
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
      },
    },
  };
}

/**
 * change_abs is new − old (signed, a decimal string); change_pct the same as a percentage of the old
 * price, rounded to 2 decimals (null from a price of 0). When the currency changed, the prices
 * cannot be compared: old_price, change_abs, change_pct and direction are null.
 */
function priceEvent(context: EventContext, before: OfferRow): EventMessage {
  const { offer } = context;
  const comparable = before.currency === offer.currency;
  const delta = offer.priceMinor - before.priceMinor;
  const message = eventMessage("price.changed", context, {
    old_price: comparable ? formatMoney(before.priceMinor, offer.currency) : null,
    new_price: formatMoney(offer.priceMinor, offer.currency),
    change_abs: comparable ? formatMoney(delta, offer.currency) : null,
    change_pct: comparable && before.priceMinor > 0 ? Math.round((delta / before.priceMinor) * 10_000) / 100 : null,
    direction: comparable ? (delta > 0 ? "up" : "down") : null,
  });
  message.price_change = comparable ? { old_minor: before.priceMinor, new_minor: offer.priceMinor } : null;
  return message;
}

function stockEvent(context: EventContext, before: OfferRow): EventMessage {
  const { offer } = context;
  return eventMessage("stock.changed", context, {
    price: formatMoney(offer.priceMinor, offer.currency),
    in_stock_before: before.inStock,
    in_stock: offer.inStock,
  });
}

// ---- Writing --------------------------------------------------------------------------------------
// Written with D1's own prepared statements: drizzle cannot put a raw `sql` statement in a batch.

/**
 * Fails (a CHECK violation: catalogue_state allows only id 1) unless the version is still `version`,
 * which rolls the whole batch back. SQLite has no RAISE outside triggers; this has the same effect.
 */
const VERSION_GUARD = `INSERT INTO catalogue_state (id, version, updated_at)
  SELECT 0, 0, '' WHERE coalesce((SELECT version FROM catalogue_state WHERE id = 1), 0) <> ?`;

function isVersionConflict(error: unknown): boolean {
  for (let e = error; e; e = e instanceof Error ? e.cause : undefined) {
    if (String(e).includes("catalogue_state_single_row")) return true;
  }
  return false;
}

/**
 * One statement for any number of rows: the rows travel as one JSON parameter (D1 allows 100 bound
 * parameters a statement) and `json_each` turns them back into rows. Column names come from the schema.
 */
function insertRows(d1: D1Database, table: SQLiteTable, rows: readonly Record<string, unknown>[], conflictTarget?: readonly string[]): D1PreparedStatement {
  const columns = Object.entries(getTableColumns(table))
    .filter(([key]) => key in rows[0]!)
    .map(([key, column]) => ({ key, name: column.name }));
  const json = JSON.stringify(rows.map((row) => Object.fromEntries(columns.map(({ key, name }) => [name, row[key] ?? null]))));
  const names = columns.map((c) => `"${c.name}"`).join(", ");
  const values = columns.map((c) => `value ->> '${c.name}'`).join(", ");
  let text = `INSERT INTO "${getTableName(table)}" (${names}) SELECT ${values} FROM json_each(?) WHERE true`;
  if (conflictTarget) {
    const updates = columns.filter((c) => !conflictTarget.includes(c.name)).map((c) => `"${c.name}" = excluded."${c.name}"`);
    text += ` ON CONFLICT (${conflictTarget.map((c) => `"${c}"`).join(", ")}) DO UPDATE SET ${updates.join(", ")}`;
  }
  return d1.prepare(text).bind(json);
}

async function writeBatch(db: Database, version: number, plan: Plan): Promise<void> {
  const d1 = (db as Database & { $client: D1Database }).$client; // the (counting) binding drizzle wraps
  const bump = bumpCatalogueVersion(db).toSQL();
  const statements = [d1.prepare(VERSION_GUARD).bind(version)];
  if (plan.competitors.length > 0) statements.push(insertRows(d1, competitors, plan.competitors, ["id"]));
  if (plan.products.length > 0) statements.push(insertRows(d1, products, plan.products, ["id"]));
  if (plan.offers.length > 0) statements.push(insertRows(d1, offers, plan.offers, ["product_id", "competitor_id"]));
  if (plan.history.length > 0) statements.push(insertRows(d1, priceHistory, plan.history));
  statements.push(d1.prepare(bump.sql).bind(...bump.params));
  await d1.batch(statements);
}
