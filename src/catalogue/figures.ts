import { divideHalfEven, formatMoney, parseDecimal, pow10 } from "../platform/money.ts";
import type { QUANTITY_UNITS } from "../platform/tables.ts";

/** The figures an offer's view derives from its row (docs/observations.md says how, with an example each). Pure. */

export type QuantityUnit = (typeof QUANTITY_UNITS)[number];

/** What a unit price is per, and how many of the observed unit make one of it (g → kg: 1,000). */
const PER: Record<QuantityUnit, { per: UnitPricePer; factor: bigint }> = {
  g: { per: "1 kg", factor: 1000n },
  kg: { per: "1 kg", factor: 1n },
  ml: { per: "1 l", factor: 1000n },
  l: { per: "1 l", factor: 1n },
  cm: { per: "1 m", factor: 100n },
  m: { per: "1 m", factor: 1n },
  m2: { per: "1 m2", factor: 1n },
  count: { per: "1 count", factor: 1n },
};
export const UNIT_PRICE_PER = ["1 kg", "1 l", "1 m", "1 m2", "1 count"] as const;
export type UnitPricePer = (typeof UNIT_PRICE_PER)[number];

/** price + shipping; unknown (null) while shipping is unknown; shipping 0 is free delivery. */
export const totalMinor = (priceMinor: number, shippingMinor: number | null) =>
  shippingMinor === null ? null : priceMinor + shippingMinor;

/**
 * The price per kg, litre, metre, square metre or piece: price ÷ quantity in that unit, rounded half-even to the
 * currency's minor unit (2.99 EUR for 500 g → 5.98 per 1 kg). Null without a quantity and unit.
 */
export function unitPrice(
  priceMinor: number,
  currency: string,
  quantity: string | null,
  unit: QuantityUnit | null,
): { amount: string; per: UnitPricePer } | null {
  if (quantity === null || unit === null) return null;
  const { units, scale } = parseDecimal(quantity);
  const { per, factor } = PER[unit];
  // price ÷ (units / 10^scale / factor) = price × factor × 10^scale ÷ units
  return { amount: formatMoney(divideHalfEven(BigInt(priceMinor) * factor * pow10(scale), units), currency), per };
}
