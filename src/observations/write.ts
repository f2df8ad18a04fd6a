import { bumpCatalogueVersion } from "../catalogue/service.ts";
import { outboxRows } from "../events/outbox-rows.ts";
import type { Database } from "../platform/db.ts";
import { insertRows } from "../platform/json-rows.ts";
import { competitors, events, offers, priceHistory, products } from "../platform/tables.ts";
import type { IngestionChanges, TouchedRows } from "./changes.ts";

/**
 * Step 3 of an ingestion: everything in ONE D1 batch (a transaction), guarded by what it read.
 * Written with D1's own prepared statements: drizzle cannot put a raw `sql` statement in a batch.
 */

/**
 * Fails (a CHECK violation: catalogue_state allows only id 1), rolling the whole batch back, when
 * anything the changes were computed from changed since it was read:
 * - a product read has another `changed_version` (every write of a product or its offers sets it to
 *   the new catalogue version, a number never used before, so an unchanged mark means an unchanged product);
 * - a product the changes create now exists (another call created the same sku);
 * - a competitor the changes name has another name or domain than the changes used (renamed, or created by
 *   another call with other values).
 * Only what this call touches is compared, so ingestions of disjoint products never fail it.
 * SQLite has no RAISE outside triggers; the failing INSERT has the same effect.
 */
const GUARD = `INSERT INTO catalogue_state (id, version, updated_at) SELECT 0, 0, '' WHERE
  (SELECT count(*) FROM json_each(?) AS seen
    JOIN products ON products.id = seen.value ->> 0 AND products.changed_version = seen.value ->> 1) <> ?
  OR EXISTS (SELECT 1 FROM products WHERE sku IN (SELECT value FROM json_each(?)))
  OR EXISTS (SELECT 1 FROM json_each(?) AS used JOIN competitors ON competitors.id = used.value ->> 0
    WHERE competitors.name IS NOT used.value ->> 1 OR competitors.domain IS NOT used.value ->> 2)`;

export function isWriteConflict(error: unknown): boolean {
  for (let e = error; e; e = e instanceof Error ? e.cause : undefined) {
    if (String(e).includes("catalogue_state_single_row")) return true;
  }
  return false;
}

/**
 * Marks the products whose view the changes alter with the version this batch moved the catalogue to
 * (read after the bump, in the batch), so the snapshot builder finds them even if its poke is lost.
 * D1 runs one batch at a time, so marks follow commit order: a build that covered version N never
 * misses a product a later batch marks (its mark is above N).
 */
const MARK_CHANGED =
  "UPDATE products SET changed_version = (SELECT version FROM catalogue_state WHERE id = 1) WHERE id IN (SELECT value FROM json_each(?))";

export async function writeBatch(db: Database, touched: TouchedRows, changes: IngestionChanges): Promise<void> {
  const d1 = db.$client; // the (counting) binding drizzle wraps
  const bump = bumpCatalogueVersion(db).toSQL();
  // Bounded by the request: at most 1,000 skus of 100 UTF-16 units (≤ 300 bytes each) and 1,000 ids, far under MAX_JSON_PARAMETER_BYTES.
  const read = touched.products.map((p) => [p.id, p.changedVersion]);
  const created = new Set(touched.products.map((p) => p.id));
  const createdSkus = changes.products.filter((p) => !created.has(p.id)).map((p) => p.sku);
  const used = changes.competitorsUsed.map((c) => [c.id, c.name, c.domain]);
  const statements = [
    d1.prepare(GUARD).bind(JSON.stringify(read), read.length, JSON.stringify(createdSkus), JSON.stringify(used)),
    d1.prepare(bump.sql).bind(...bump.params),
  ];
  // A competitor is created by its first observation and never renamed by one (PATCH /admin/competitors/:id does that).
  if (changes.competitors.length > 0)
    statements.push(...insertRows(d1, { table: competitors, rows: changes.competitors, conflict: { target: ["id"], update: false } }));
  if (changes.products.length > 0)
    statements.push(...insertRows(d1, { table: products, rows: changes.products, conflict: { target: ["id"], update: true } }));
  if (changes.offers.length > 0)
    statements.push(
      ...insertRows(d1, { table: offers, rows: changes.offers, conflict: { target: ["product_id", "competitor_id"], update: true } }),
    );
  if (changes.history.length > 0) statements.push(...insertRows(d1, { table: priceHistory, rows: changes.history }));
  // The outbox: the events commit with the change or not at all (src/events/outbox.ts relays them).
  if (changes.events.length > 0)
    statements.push(...insertRows(d1, { table: events, rows: outboxRows(changes.events, new Date().toISOString()) }));
  // The products the catalogue snapshot must re-serialise (src/catalogue/snapshot/build.ts reads these marks).
  const productIds = [...new Set([...changes.products.map((p) => p.id), ...changes.offers.map((o) => o.productId)])];
  statements.push(d1.prepare(MARK_CHANGED).bind(JSON.stringify(productIds)));
  await d1.batch(statements);
}
