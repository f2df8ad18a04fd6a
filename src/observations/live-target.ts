import { type AnyColumn, type SQL, sql } from "drizzle-orm";
import { relayEvents } from "../events/outbox.ts";
import type { RequestServices } from "../http/app-env.ts";
import type { Database } from "../platform/db.ts";
import { logger } from "../platform/log.ts";
import { competitors, offers, products } from "../platform/tables.ts";
import type { TouchedRows } from "./changes.ts";
import type { Observation } from "./schema.ts";
import type { IngestionTarget } from "./service.ts";
import { writeBatch } from "./write.ts";

/** The live catalogue as an ingestion's target: D1's products, offers, history and outbox, the snapshot builder's poke and the events' relay. */
export const liveTarget = ({ db, queue, catalogue }: Pick<RequestServices, "db" | "queue" | "catalogue">): IngestionTarget => ({
  read: (observations) => readTouchedRows(db, observations),
  write: (touched, changes) => writeBatch(db, touched, changes),
  async committed(events) {
    await catalogue
      .poke()
      .catch((error: unknown) => logger("catalogue").error("builder poke failed; the sweep will catch up", { error: String(error) }));
    await relayEvents(db, queue, events);
  },
});

/** `column IN (the values)`, the values bound as one JSON array (D1 allows 100 parameters a statement). */
const inJson = (column: AnyColumn | SQL, values: readonly string[]) =>
  sql`${column} IN (SELECT value FROM json_each(${JSON.stringify([...new Set(values)])}))`;

async function readTouchedRows(db: Database, observations: readonly Observation[]): Promise<TouchedRows> {
  const skus = observations.map((o) => o.sku);
  const [productRows, offerRows, competitorRows] = await db.batch([
    db.select().from(products).where(inJson(products.sku, skus)),
    db
      .select()
      .from(offers)
      .where(sql`${offers.productId} IN (SELECT id FROM products WHERE ${inJson(sql`sku`, skus)})`),
    db
      .select()
      .from(competitors)
      .where(
        inJson(
          competitors.id,
          observations.map((o) => o.competitor.id),
        ),
      ),
  ]);
  return { products: productRows, offers: offerRows, competitors: competitorRows };
}
