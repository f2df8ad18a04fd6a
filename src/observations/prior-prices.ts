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
 *
 * Nothing else bounds it: each entry left may be a later window's lowest (once the ones before it leave the window),
 * so forgetting one, however many there are, could report a lowest above the true one. Its size is the prices the
 * offer rose to within 30 days and never fell below since: a few for prices that go up and down, one per change only
 * for a rise after rise, at about 35 bytes each in the offer's row.
 */

const PRIOR_WINDOW_MS = 30 * DAY_MS;

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
  return { priorPrices: kept, lowestMinor: kept[0]![1] };
}
