import { type SQL, sql } from "drizzle-orm";
import { QueryBuilder } from "drizzle-orm/sqlite-core";
import { products } from "../platform/tables.ts";

/**
 * search_products' text, word by word: every word of it must be found in the product's name, brand or SKU (each word
 * a substring of one of them, in any order, case-insensitive), through the trigram index
 * (migrations/0013_products_search.sql); apart from the tools so that the bench (plain Node) can render it too
 * (bench/modes/search.ts). Each word is a quoted phrase, so its own quotes and FTS operators mean nothing.
 */

/** A text's words: split on white space, lower case, each once. */
export const searchWords = (query: string) => [
  ...new Set(
    query
      .toLowerCase()
      .split(/\s+/u)
      .filter((word) => word.length > 0),
  ),
];

/** The index holds pieces of three characters: a shorter word has none, and is checked on what the longer ones found. */
const indexed = (word: string) => [...word].length >= 3;

const phrase = (text: string) => `"${text.replaceAll('"', '""')}"`;

/**
 * The index's query: the words of 3 characters or more, each a phrase, all of them required (FTS5's implicit AND).
 * A text with no such word (each shorter, as "tv 4k") is looked for whole, its words in their order: it has 3 characters or more.
 */
function indexQuery(query: string): string {
  const words = searchWords(query).filter(indexed);
  return words.length > 0 ? words.map(phrase).join(" ") : phrase(query.toLowerCase().trim().split(/\s+/u).join(" "));
}

/** Whether a product's searchable fields hold every word of the text (what the index finds, and its short words too). */
export function holdsEveryWord(query: string, fields: readonly (string | null)[]): boolean {
  const texts = fields.flatMap((field) => (field === null ? [] : [field.toLowerCase()]));
  return searchWords(query).every((word) => texts.some((text) => text.includes(word)));
}

/**
 * The rowids of at most `limit` products holding the text's indexed words, in the index's own order, as a subquery to
 * join products on: FTS5 stops after `limit` matches instead of reading, then sorting, every product that holds a
 * common trigram.
 */
export const textMatches = (query: string, limit: number) =>
  new QueryBuilder()
    .select({ rowid: sql<number>`rowid`.as("matched") })
    .from(sql`products_search`)
    .where(sql`products_search MATCH ${indexQuery(query)}`)
    .limit(limit)
    .as("text_match");

/** The join of products to textMatches' rows. */
export const matchedProduct = (matches: ReturnType<typeof textMatches>): SQL => sql`${products}.rowid = ${matches.rowid}`;

/** Whether the products row at hand holds the text's indexed words: one rowid looked up in the index, not every match. */
export const holdsText = (query: string): SQL =>
  sql`EXISTS (SELECT 1 FROM products_search WHERE products_search MATCH ${indexQuery(query)} AND rowid = ${products}.rowid)`;
