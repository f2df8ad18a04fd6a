import { type SQL, sql } from "drizzle-orm";
import { QueryBuilder } from "drizzle-orm/sqlite-core";
import { products } from "../platform/tables.ts";

/**
 * search_products' text (a substring of name, brand or SKU, case-insensitive) through the trigram index
 * (migrations/0013_products_search.sql), apart from the tools so that the bench (plain Node) can render it too
 * (bench/modes/search.ts). The text is one quoted phrase, so its own quotes and FTS operators mean nothing.
 */

const phrase = (query: string) => `"${query.replaceAll('"', '""')}"`;

/**
 * The rowids of at most `limit` products holding the text, in the index's own order, as a subquery to join
 * products on: FTS5 stops after `limit` matches instead of reading, then sorting, every product that holds a
 * common trigram.
 */
export const textMatches = (query: string, limit: number) =>
  new QueryBuilder()
    .select({ rowid: sql<number>`rowid`.as("matched") })
    .from(sql`products_search`)
    .where(sql`products_search MATCH ${phrase(query)}`)
    .limit(limit)
    .as("text_match");

/** The join of products to textMatches' rows. */
export const matchedProduct = (matches: ReturnType<typeof textMatches>): SQL => sql`${products}.rowid = ${matches.rowid}`;

/** Whether the products row at hand holds the text: one rowid looked up in the index, not every match. */
export const holdsText = (query: string): SQL =>
  sql`EXISTS (SELECT 1 FROM products_search WHERE products_search MATCH ${phrase(query)} AND rowid = ${products}.rowid)`;
