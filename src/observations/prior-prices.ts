import type { PriorPrice } from "../platform/tables.ts";
import { DAY_MS } from "../platform/time.ts";

/**
 * An offer's `lowest_price_30d`: the lowest price it held in the 30 days before its current price took effect (the
 * EU's prior price for a reduction). Kept with the offer as its prices arrive, so a read costs nothing more and the
 * history's move to R2 (src/catalogue/history-archive.ts) cannot change it.
 *
 * `prior_prices` holds the prices the offer held before its current one, each with the moment it ended, oldest first,
 * pruned as a sliding-window minimum: a price is dropped once a later one is as low or lower (whenever the older is
 * inside a later window, so is the newer), or once it ended 30 days or more before the latest change. What is left
 * rises from oldest to newest, so the window's lowest is its first entry.
 */

const PRIOR_WINDOW_MS = 30 * DAY_MS;
/**
 * A bound on the row: 64 rises in a row within 30 days (each dearer than the last, none lower since) keep 64 entries;
 * a 65th forgets the oldest, the lowest, which then no longer counts. Prices that go up and down keep only a few.
 */
const MAX_PRIOR_PRICES = 64;

/**
 * The offer's prior prices and lowest_price_30d after its price changed at `changedAt` from `oldMinor` (in the same
 * currency): never null, as the old price itself was held up to the change.
 */
export function afterPriceChange(
  prior: readonly PriorPrice[],
  oldMinor: number,
  changedAt: string,
): { priorPrices: PriorPrice[]; lowestMinor: number } {
  const opens = new Date(Date.parse(changedAt) - PRIOR_WINDOW_MS).toISOString();
  const kept = prior.filter(([endedAt, minor]) => endedAt > opens && minor < oldMinor);
  kept.push([changedAt, oldMinor]);
  const priorPrices = kept.slice(-MAX_PRIOR_PRICES);
  return { priorPrices, lowestMinor: priorPrices[0]![1] };
}
