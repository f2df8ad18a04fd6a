import { z } from "zod";

/** What PUT /admin/fx-rates publishes to R2 for the converted reads (src/fx-rates/service.ts), and where. */

/** In the catalogue's bucket (the seed removes it: scripts/seed.ts). */
export const PUBLISHED_RATES_KEY = "fx-rates/published.json";

/**
 * As of `as_of` (the publisher's UTC day): the latest day on or before it and every later day, oldest first. So any
 * day from `as_of` on finds its latest day on or before it here, as latestRates would in D1.
 */
export const PublishedRates = z.object({
  as_of: z.iso.date(),
  days: z.array(z.object({ base: z.string(), date: z.iso.date(), rates: z.record(z.string(), z.string()) })),
});
export type PublishedRates = z.infer<typeof PublishedRates>;
