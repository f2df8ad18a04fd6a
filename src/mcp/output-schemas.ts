import { z } from "zod";
import { CompetitorList, History, Product, Summary } from "../catalogue/schema.ts";
import { EventFeed, FeedEvent } from "../events/schema.ts";

/**
 * Each tool's `outputSchema`: the REST routes' own shapes (src/catalogue/schema.ts, src/events/schema.ts), as the
 * tool answers with what its route gives. The SDK checks every answer's `structuredContent` against it.
 */

const truncated = (description: string) => z.boolean().meta({ description });

export const searchProductsOutput = z.object({
  products: z.array(
    Product.pick({ id: true, sku: true, name: true, brand: true, category: true }).extend(
      Summary.pick({ lowest_offer: true, min_price: true, currency: true, offer_count: true }).shape,
    ),
  ),
  truncated: truncated("More products may match beyond those examined: narrow the search"),
  hint: z
    .string()
    .optional()
    .meta({ description: "Only when no product matched: what to try (fewer words, each word alone, a brand or category filter)" }),
});

// The shapes themselves, not their components: a tool's outputSchema must be an object schema at its top, not a $ref.
export const getProductOutput = z.object(Product.shape);

export const priceHistoryOutput = History.extend({
  truncated: truncated("More than 1,000 rows matched: only the oldest 1,000 are here (as X-Result-Truncated)"),
});

export const listCompetitorsOutput = z.object(CompetitorList.shape);

export const recentChangesOutput = EventFeed.extend({ events: z.array(FeedEvent).meta({ description: "Newest first" }) });
