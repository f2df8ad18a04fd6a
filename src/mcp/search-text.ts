import { sql } from "drizzle-orm";
import { products } from "../platform/tables.ts";

/** search_products' text condition, apart from the tools so that the bench (plain Node) can render it too (bench/modes/search.ts). */

/** The trigram index finds texts of at least this many characters; a shorter one is looked for by a scan. */
const INDEXED_TEXT_LENGTH = 3;

/**
 * The text condition: a substring of name, brand or SKU, case-insensitive. Three characters or more go
 * through the trigram index (migrations/0013_products_search.sql), as one quoted phrase (so the text's
 * own quotes and FTS operators mean nothing); shorter texts, which no trigram holds, scan products.
 */
export function textCondition(query: string | undefined) {
  if (query === undefined) return sql`1`;
  return [...query].length >= INDEXED_TEXT_LENGTH ? indexedText(query) : scannedText(query);
}

export const indexedText = (query: string) =>
  sql`${products}.rowid IN (SELECT rowid FROM products_search WHERE products_search MATCH ${`"${query.replaceAll('"', '""')}"`})`;

/** Every product's three fields read (the only way before the index, and still for texts under 3 characters). */
export const scannedText = (query: string) => {
  const needle = query.toLowerCase();
  return sql`(instr(lower(${products.name}), ${needle}) > 0 OR instr(lower(coalesce(${products.brand}, '')), ${needle}) > 0
    OR instr(lower(${products.sku}), ${needle}) > 0)`;
};
