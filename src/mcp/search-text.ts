import { type SQL, sql } from "drizzle-orm";
import { products } from "../platform/tables.ts";

/**
 * search_products' text (a substring of name, brand or SKU, case-insensitive) through the trigram index
 * (migrations/0013_products_search.sql), apart from the tools so that the bench (plain Node) can render it too
 * (bench/modes/search.ts). The text is one quoted phrase, so its own quotes and FTS operators mean nothing.
 */

const phrase = (query: string) => `"${query.replaceAll('"', '""')}"`;

/**
 * The products holding the text, as a FROM clause: at most `limit` of them in the index's own order (rowid),
 * so FTS5 stops after `limit` matches instead of reading, then sorting, every product that holds a common
 * trigram.
 */
export const productsHoldingText = (query: string, limit: number): SQL =>
  sql`(SELECT rowid AS matched FROM products_search WHERE products_search MATCH ${phrase(query)} LIMIT ${limit}) AS text_match
    CROSS JOIN ${products} ON ${products}.rowid = text_match.matched`;

/** Whether the products row at hand holds the text: one rowid looked up in the index, not every match. */
export const holdsText = (query: string): SQL =>
  sql`EXISTS (SELECT 1 FROM products_search WHERE products_search MATCH ${phrase(query)} AND rowid = ${products}.rowid)`;
