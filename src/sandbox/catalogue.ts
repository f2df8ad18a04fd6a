import type { ArchivedHistoryRow } from "../catalogue/history-archive.ts";
import type { CompetitorRow, OfferRow, ProductRow } from "../catalogue/views.ts";
import { afterPriceChange } from "../observations/prior-prices.ts";
import { onForget } from "../platform/isolate-memory.ts";
import type { PriorPrice } from "../platform/tables.ts";
import { DAY_MS, HOUR_MS, MINUTE_MS } from "../platform/time.ts";
import { PRODUCT_LINES, SANDBOX_SHOPS, type SandboxShop, SHOP_CURRENCIES, shopPrice } from "./world.ts";

/**
 * The sandbox's base: 1,000 synthetic products, the same for every account and deployment, generated in the isolate
 * from a fixed seed (no D1, no R2), with 30 days of history ending at the current hour. Every figure is a pure function
 * of the seed, the product, the shop and the day, so yesterday's history is the same today and only the window slides.
 * An isolate keeps the base of the current hour (src/sandbox/overlay.ts lays an account's changes over it).
 */

const SANDBOX_PRODUCT_COUNT = 1000;
/** Every sandbox SKU starts so; POST /test/observations takes no other. */
export const SANDBOX_SKU_PREFIX = "TEST-";
const SEED = 0x7e57_2026;
const HISTORY_DAYS = 30;
/** One day in this many, an offer is out of stock. */
const OUT_OF_STOCK_SHARE = 0.05;
const RELISTED = ["", " (Renewed)", " (Open Box)", " (Bundle)"];

/** A number in [0, 1) from the seed and the parts: the same parts, the same number, in any isolate. */
function unit(...parts: number[]): number {
  let h = SEED;
  for (const part of parts) {
    h = Math.imul(h ^ part, 0x9e3779b1);
    h ^= h >>> 15;
    h = Math.imul(h, 0x85ebca77);
    h ^= h >>> 13;
  }
  return (h >>> 0) / 4294967296;
}
const hex8 = (...parts: number[]) =>
  Math.floor(unit(...parts) * 4294967296)
    .toString(16)
    .padStart(8, "0");
const digits = (count: number, ...parts: number[]) => Array.from({ length: count }, (_, k) => Math.floor(unit(...parts, k) * 10)).join("");

export interface SandboxBase {
  /** The hour this base is of (epoch ms of its start): offers are checked then, history ends then. */
  hour: number;
  products: ProductRow[];
  /** By product id, each product's offers in competitor-id order. */
  offers: Map<string, OfferRow[]>;
  byId: Map<string, number>;
  bySku: Map<string, number>;
  competitors: CompetitorRow[];
}

interface OfferPlan {
  shop: SandboxShop;
  shopIndex: number;
  listMinor: number;
  periodDays: number;
  phase: number;
  minuteOfDay: number;
}

function productOf(index: number) {
  const line = PRODUCT_LINES[index % PRODUCT_LINES.length]!;
  const nth = Math.floor(index / PRODUCT_LINES.length);
  const pairs = line.lines.length * line.variants.length;
  const pair = (nth * 5 + index) % pairs;
  const [brand, name, usd] = line.lines[Math.floor(pair / line.variants.length)]!;
  const [variant, factor] = line.variants[pair % line.variants.length]!;
  const sku = `${SANDBOX_SKU_PREFIX}${line.code}-${String(index + 1).padStart(4, "0")}`;
  return {
    id: `prd_${hex8(index, 0)}${hex8(index, 1)}${hex8(index, 2)}${hex8(index, 3)}`,
    sku,
    name: `${brand} ${name}${variant ? `, ${variant}` : ""}${RELISTED[Math.floor(nth / pairs) % RELISTED.length]}`,
    brand,
    category: line.category,
    gtin: `0${digits(12, index, 4)}`,
    mpn: `${brand
      .replace(/[^A-Za-z]/g, "")
      .slice(0, 2)
      .toUpperCase()}-${digits(6, index, 5)}`,
    usdCents: Math.round(usd * factor * 100),
  };
}

function offerPlans(index: number, usdCents: number): OfferPlan[] {
  const count = 2 + Math.floor(unit(index, 6) * 4);
  return SANDBOX_SHOPS.map((shop, shopIndex) => ({ shop, shopIndex }))
    .sort((a, b) => unit(index, 7, a.shopIndex) - unit(index, 7, b.shopIndex))
    .slice(0, count)
    .sort((a, b) => (a.shop.id < b.shop.id ? -1 : 1))
    .map(({ shop, shopIndex }) => {
      const periodDays = 3 + Math.floor(unit(index, shopIndex, 8) * 8);
      return {
        shop,
        shopIndex,
        listMinor: shopPrice(usdCents * (0.95 + unit(index, shopIndex, 9) * 0.1), shop.currency, () => unit(index, shopIndex, 10)),
        periodDays,
        phase: Math.floor(unit(index, shopIndex, 11) * periodDays),
        minuteOfDay: Math.floor(unit(index, shopIndex, 12) * 24 * 60),
      };
    });
}

/** The offer on a day: a discount that holds for a period of days, and now and then a day out of stock. */
function offerOnDay(index: number, plan: OfferPlan, day: number) {
  const period = Math.floor((day + plan.phase) / plan.periodDays);
  const discount = 0.25 * unit(index, plan.shopIndex, 13, period) ** 2;
  const { step } = SHOP_CURRENCIES[plan.shop.currency];
  const cents = Math.round((plan.listMinor * (1 - discount)) / step) * step;
  const priceMinor = plan.shop.currency === "JPY" ? cents : Math.floor(cents / 100) * 100 + (discount < 0.01 ? plan.listMinor % 100 : 99);
  return { priceMinor, inStock: unit(index, plan.shopIndex, 14, day) >= OUT_OF_STOCK_SHARE };
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The offer's history in the window ending at `hour`: its state on the window's first day, then each change. */
function offerHistory(index: number, plan: OfferPlan, hour: number): (ArchivedHistoryRow & { day: number })[] {
  const lastDay = Math.floor(hour / DAY_MS);
  const rows: (ArchivedHistoryRow & { day: number })[] = [];
  for (let day = lastDay - HISTORY_DAYS + 1; day <= lastDay; day++) {
    const at = day * DAY_MS + plan.minuteOfDay * MINUTE_MS;
    if (at > hour) break;
    const state = offerOnDay(index, plan, day);
    const last = rows.at(-1);
    if (last && last.priceMinor === state.priceMinor && last.inStock === state.inStock) continue;
    // Negative ids, the same for a day's row whenever it is generated: never an id of the account's own rows, which D1 numbers from 1.
    const id = -((index * SANDBOX_SHOPS.length + plan.shopIndex) * 100_000 + (day % 100_000));
    rows.push({ id, day, competitorId: plan.shop.id, currency: plan.shop.currency, observedAt: iso(at), ...state });
  }
  return rows;
}

function generate(hour: number): SandboxBase {
  const windowStart = iso((Math.floor(hour / DAY_MS) - HISTORY_DAYS + 1) * DAY_MS);
  const products: ProductRow[] = [];
  const offers = new Map<string, OfferRow[]>();
  for (let index = 0; index < SANDBOX_PRODUCT_COUNT; index++) {
    const { usdCents, ...product } = productOf(index);
    let lastChangedAt: string | null = null;
    const rows = offerPlans(index, usdCents).map((plan): OfferRow => {
      const history = offerHistory(index, plan, hour);
      const current = history.at(-1)!;
      const priceChanges = history.filter((row, i) => i > 0 && row.priceMinor !== history[i - 1]!.priceMinor);
      const lastChange = priceChanges.at(-1);
      // lowest_price_30d as an ingestion keeps it: each change of the generated history folded in, oldest first.
      const prior = priceChanges.reduce(
        (held, row) => afterPriceChange(held.priorPrices, history[history.indexOf(row) - 1]!.priceMinor, row.observedAt),
        { priorPrices: [] as PriorPrice[], lowestMinor: null as number | null },
      );
      const changedAt = history.length > 1 ? history.at(-1)!.observedAt : null;
      if (changedAt !== null && (lastChangedAt === null || changedAt > lastChangedAt)) lastChangedAt = changedAt;
      return {
        productId: product.id,
        competitorId: plan.shop.id,
        url: `https://${plan.shop.domain}/p/${product.sku.toLowerCase()}`,
        priceMinor: current.priceMinor,
        regularPriceMinor: current.priceMinor < plan.listMinor ? plan.listMinor : null,
        currency: plan.shop.currency,
        shippingMinor: plan.shop.shipping,
        inStock: current.inStock,
        previousPriceMinor: lastChange ? history[history.indexOf(lastChange) - 1]!.priceMinor : null,
        priceChangedAt: lastChange?.observedAt ?? null,
        checkedAt: iso(hour),
        seller: null,
        condition: "new",
        quantity: null,
        unit: null,
        checkStatus: "ok",
        lowestPrice30dMinor: prior.lowestMinor,
        priorPrices: prior.priorPrices,
      };
    });
    products.push({
      ...product,
      url: null,
      imageUrl: null,
      createdAt: windowStart,
      updatedAt: lastChangedAt ?? windowStart,
      lastChangedAt,
      changedVersion: 0,
    });
    offers.set(product.id, rows);
  }
  return {
    hour,
    products,
    offers,
    byId: new Map(products.map((product, index) => [product.id, index])),
    bySku: new Map(products.map((product, index) => [product.sku, index])),
    competitors: SANDBOX_SHOPS.map(({ id, name, domain }) => ({ id, name, domain })),
  };
}

let cached: SandboxBase | undefined;
onForget(() => {
  cached = undefined;
});

/** The base of the hour `now` falls in, generated once an hour per isolate. */
export function sandboxBase(now = Date.now()): SandboxBase {
  const hour = Math.floor(now / HOUR_MS) * HOUR_MS;
  if (cached?.hour !== hour) cached = generate(hour);
  return cached;
}

/** A base product's generated history, oldest first (GET /products/{id}/history and the alert rules' prior prices). */
export function baseHistory(base: SandboxBase, productId: string): ArchivedHistoryRow[] {
  const index = base.byId.get(productId);
  if (index === undefined) return [];
  const { usdCents } = productOf(index);
  return offerPlans(index, usdCents)
    .flatMap((plan) => offerHistory(index, plan, base.hour).map(({ day: _, ...row }) => row))
    .sort((a, b) => (a.observedAt < b.observedAt ? -1 : a.observedAt > b.observedAt ? 1 : a.id - b.id));
}
