import { env } from "cloudflare:workers";
import { asc } from "drizzle-orm";
import { type OfferRow, productView } from "../../src/catalogue/views.ts";
import { database } from "../../src/platform/db.ts";
import { competitors, offers, products } from "../../src/platform/tables.ts";

/** The product views straight from D1, in id order: what every response must equal, byte for byte. */
export async function expectedProducts(): Promise<string[]> {
  const db = database(env.DB);
  const [productRows, offerRows, competitorRows] = await db.batch([
    db.select().from(products).orderBy(asc(products.id)),
    db.select().from(offers).orderBy(asc(offers.productId), asc(offers.competitorId)),
    db.select().from(competitors),
  ]);
  const names = new Map(competitorRows.map((row) => [row.id, row]));
  const byProduct = new Map<string, OfferRow[]>();
  for (const offer of offerRows) byProduct.set(offer.productId, [...(byProduct.get(offer.productId) ?? []), offer]);
  return productRows.map((row) => JSON.stringify(productView(row, byProduct.get(row.id) ?? [], names)));
}

export const listBody = (lines: readonly string[]) => `{"products":[${lines.join(",")}]}`;
