import { z } from "zod";
import type { HistoryPage } from "../catalogue/history.ts";
import { type HistoryQuery, historyQuery, productsQuery } from "../catalogue/schema.ts";
import { searchWords } from "../catalogue/search-text.ts";
import { eventsQuery } from "../events/query.ts";
import { ApiError } from "../http/errors.ts";
import { DAY_MS } from "../platform/time.ts";

/**
 * The MCP tools' inputs and what they add to the reads the key's door answers (src/key-data/door.ts). Their inputs are
 * the REST routes' own zod fields (the filters of GET /products, the query of GET /products/:id/history and
 * GET /events), so a value one refuses the other refuses too.
 */

const { sku, competitor, brand, category, currency } = productsQuery.shape;
const convertInto = currency.describe(
  "Convert into this currency (ISO-4217, as ?currency=): prices from the latest rates on or before today, and lowest_offer " +
    "compared across currencies; offers without a rate are left out of the summary; a currency without a rate is refused " +
    "(GET /fx-rates lists those that have one)",
);
const limit = (most: number, fallback: number) =>
  z
    .int({ error: `must be a whole number from 1 to ${most}` })
    .min(1, { error: `must be from 1 to ${most}` })
    .max(most, { error: `must be from 1 to ${most}` })
    .default(fallback);

export const searchProductsInput = {
  query: z
    .string()
    .refine((text) => !/\p{Cc}/u.test(text), { error: "must not contain control characters (a NUL, a tab, a line break)" })
    // Counted in code points, as the trigram tokenizer counts. The index holds pieces of three characters: a shorter
    // text could only be looked for by reading every product.
    .refine((text) => [...text].length >= 3 && [...text].length <= 200, { error: "must be 3 to 200 characters" })
    // \p{Cc} is U+0000–U+001F and U+007F–U+009F: spelled out, so that a client in any language compiles the pattern.
    .meta({ minLength: 3, maxLength: 200, pattern: "^[^\\u0000-\\u001F\\u007F-\\u009F]*$" })
    .optional()
    .describe(
      'Words to find, each in the product\'s name, brand or SKU, in any order and any case ("sony headphones"): 3 to 200 characters, no control characters',
    ),
  brand: brand.describe("Brand, case-insensitive (as GET /products?brand=)"),
  category: category.describe("Category, case-insensitive (as GET /products?category=)"),
  competitor: competitor.describe("Only products with an offer from this competitor id"),
  sku: sku.describe("Exactly this SKU"),
  limit: limit(100, 20).describe("At most this many products (1 to 100, default 20)"),
  currency: convertInto,
};

const productId = z.string().min(1).max(200);

/** `id` as the contract names it, and `product_id` as price_history names the same id: either is taken (docs/decisions.md). */
export const getProductInput = {
  id: productId.optional().describe("The product's id (prd_…); give this, product_id (the same) or sku"),
  product_id: productId.optional().describe("The product's id (prd_…): the same as id, named as price_history names it"),
  sku: sku.describe("The product's SKU"),
  currency: convertInto,
};

/** get_product's one product: by its id (under either name, the same value if both) or by its SKU, never both. */
export function productWanted(input: z.output<z.ZodObject<typeof getProductInput>>) {
  const ids = [...new Set([input.id, input.product_id].filter((id) => id !== undefined))];
  if (ids.length > 1) throw new ApiError(400, "id and product_id name the same thing and differ here: give one of them.");
  if ((ids.length === 0) === (input.sku === undefined))
    throw new ApiError(400, "Give exactly one of id (or product_id, the same) and sku.");
  return ids.length === 1 ? { id: ids[0], currency: input.currency } : { sku: input.sku, currency: input.currency };
}

const history = historyQuery.shape;
export const priceHistoryInput = {
  product_id: productId.describe("The product's id (prd_…)"),
  competitor: history.competitor,
  from: history.from,
  to: history.to,
  points: z
    .int()
    .min(2)
    .max(500)
    .optional()
    .describe("Downsample each competitor's series to at most this many points (2 to 500), keeping its first and last"),
};

const events = eventsQuery.shape;
export const recentChangesInput = {
  after: events.after.describe(
    "Events older than this one: the next_cursor of the previous page (an event older than 30 days or unknown is refused)",
  ),
  since: events.since.describe("Events at or after this instant (ISO-8601); the last 24 hours by default"),
  type: events.type,
  limit: limit(100, 20).describe("At most this many events (1 to 100, default 20)"),
};

type SearchProductsInput = z.output<z.ZodObject<typeof searchProductsInput>>;

const quoted = (words: readonly string[]) => words.map((word) => JSON.stringify(word)).join(", ");

/**
 * What to try when a search found nothing: each of its words alone, or a word with a brand or category filter (for a
 * text of several words), a filter dropped, or a narrower search when more may match beyond what was examined.
 */
export function searchHint(input: SearchProductsInput, truncated: boolean): string {
  const filters = (["brand", "category", "competitor", "sku"] as const).filter((name) => input[name] !== undefined);
  const tries: string[] = [];
  if (input.query !== undefined) {
    const words = searchWords(input.query);
    if (words.length > 1)
      tries.push(
        `fewer words (every word must be in the name, brand or SKU: try ${quoted(words)} alone)`,
        `one word with a brand or category filter (query ${JSON.stringify(words.at(-1))} with brand ${JSON.stringify(words[0])})`,
      );
    else tries.push("another spelling or a shorter part of the word (it is looked for inside the name, brand and SKU)");
  }
  if (filters.length > 0) tries.push(`without ${filters.join(", ")} (brand and category match the whole value, in any case)`);
  if (truncated) tries.push("a brand, category or competitor filter: more products may match beyond those examined");
  if (tries.length === 0) tries.push("list_competitors, then a competitor filter, to see what the catalogue holds");
  const what = input.query === undefined ? "these filters" : `every word of ${JSON.stringify(input.query)}`;
  return `No product matches ${what}. Try ${tries.join("; or ")}.`;
}

export type RecentChangesInput = z.output<z.ZodObject<typeof recentChangesInput>>;

/** Every `points`-th of n indexes, evenly spread, the first and the last always in. */
function downsample<T>(series: readonly T[], points: number): T[] {
  if (series.length <= points) return [...series];
  return Array.from({ length: points }, (_, i) => series[Math.round((i * (series.length - 1)) / (points - 1))]!);
}

/** price_history: the product's history as `read` gives it (the catalogue's or the sandbox's), downsampled when asked. */
export async function priceHistoryOf(
  read: (productId: string, query: HistoryQuery) => Promise<HistoryPage>,
  input: z.output<z.ZodObject<typeof priceHistoryInput>>,
) {
  const { truncated, ...page } = await read(input.product_id, { competitor: input.competitor, from: input.from, to: input.to });
  if (input.points === undefined) return { ...page, truncated };
  const byCompetitor = new Map<string, typeof page.history>();
  for (const entry of page.history) byCompetitor.set(entry.competitor_id, [...(byCompetitor.get(entry.competitor_id) ?? []), entry]);
  const history = [...byCompetitor.values()]
    .flatMap((series) => downsample(series, input.points!))
    .sort((a, b) => (a.observed_at < b.observed_at ? -1 : a.observed_at > b.observed_at ? 1 : 0));
  return { ...page, history, truncated };
}

/** recent_changes' feed query: the window holds for every page (a cursor pages back through it, to its start). */
export const recentChangesQuery = (input: RecentChangesInput) => ({
  since: input.since ?? new Date(Date.now() - DAY_MS).toISOString(),
  type: input.type,
  limit: input.limit,
  after: input.after,
});
