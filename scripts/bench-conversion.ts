/**
 * `node scripts/bench-conversion.ts [--products N]`
 *
 * The CPU one product's `?currency=` conversion takes (src/catalogue/converted.ts, convertProductJson), over N product
 * lines (default 20,000) shaped as the seed makes them (scripts/seed.ts: 1–6 offers in USD, GBP, EUR and JPY, some with
 * shipping, sale prices, sellers, unit prices), into EUR with the seed's rates, written as the list writes them (joined and
 * encoded a batch at a time: a conversion that builds its text in pieces pays for joining them there). A micro-benchmark,
 * in Node: it compares one implementation with another, not with workerd's figures.
 */
import { parseArgs } from "node:util";
import { conversionInto, convertProductJson } from "../src/catalogue/converted.ts";
import { type OfferRow, type ProductRow, productView } from "../src/catalogue/views.ts";
import { mulberry32 } from "./seeded-random.ts";

const { values: args } = parseArgs({ options: { products: { type: "string", default: "20000" } } });
const productCount = Number(args.products);

/** Seeded, so every run converts the same lines. */
const random = mulberry32(42);
const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)]!;
const iso = (ms: number) => new Date(ms).toISOString();

const SHOPS = [
  ["cmp_amazon", "Amazon", "USD"],
  ["cmp_walmart", "Walmart", "USD"],
  ["cmp_bestbuy", "Best Buy", "USD"],
  ["cmp_target", "Target", "USD"],
  ["cmp_newegg", "Newegg", "USD"],
  ["cmp_argos", "Argos", "GBP"],
  ["cmp_currys", "Currys", "GBP"],
  ["cmp_mediamarkt", "MediaMarkt", "EUR"],
  ["cmp_fnac", "Fnac", "EUR"],
  ["cmp_rakuten", "Rakuten", "JPY"],
] as const;
const SEED_RATES = { USD: "1.0832", GBP: "0.8571", JPY: "162.45", CHF: "0.9412", CAD: "1.5148", AUD: "1.6623", KWD: "0.3331" };
const NOW = Date.parse("2026-12-07T12:00:00.000Z");

function productLine(i: number): string {
  const id = `prd_${(0x10000000 + i).toString(16)}${"0".repeat(24)}`;
  const sku = `SON-TV-${String(i + 1).padStart(6, "0")}`;
  const product: ProductRow = {
    id,
    sku,
    gtin: random() < 0.9 ? String(int(1e12, 9e12)) : null,
    mpn: `SO${int(100000, 999999)}`,
    name: `Sony Bravia ${pick(["XR-55A80L", "KD-65X85L", "XR-77A95L"])}, ${pick(["55 in", "65 in", "77 in"])}`,
    brand: "Sony",
    category: pick(["TVs", "Headphones", "Coffee", "Drones", "Accessories"]),
    url: `https://www.sony.com/products/so${i}`,
    imageUrl: `https://images.pricedata.example/${id}.jpg`,
    createdAt: iso(NOW - int(30, 600) * 86_400_000),
    updatedAt: iso(NOW - int(1, 12) * 86_400_000),
    lastChangedAt: random() < 0.8 ? iso(NOW - int(1, 12) * 86_400_000) : null,
    changedVersion: 0,
  };
  const shops = [...SHOPS].sort(() => random() - 0.5).slice(0, pick([1, 2, 2, 3, 3, 3, 4, 4, 5, 6]));
  const offers = shops
    .sort((a, b) => (a[0] < b[0] ? -1 : 1))
    .map(([competitorId, , currency]): OfferRow => {
      const priceMinor = currency === "JPY" ? int(1000, 30000) * 10 : int(999, 249999);
      return {
        productId: id,
        competitorId,
        url: `https://www.${competitorId.slice(4)}.example/p/sony-bravia-${sku.toLowerCase()}`,
        priceMinor,
        regularPriceMinor: random() < 0.3 ? Math.round(priceMinor * 1.2) : null,
        currency,
        shippingMinor: currency === "JPY" ? pick([0, 0, 500, null]) : pick([0, 0, 0, 499, 599, null]),
        inStock: random() < 0.85,
        previousPriceMinor: random() < 0.7 ? Math.round(priceMinor * 1.1) : null,
        priceChangedAt: iso(NOW - int(1, 30) * 86_400_000),
        checkedAt: iso(NOW - int(0, 3600) * 1000),
        seller: random() < 0.1 ? "Marketplace Seller GmbH" : null,
        condition: pick(["new", "new", "new", "refurbished", "used"] as const),
        quantity: random() < 0.2 ? "250" : null,
        unit: null,
        checkStatus: "ok",
        lowestPrice30dMinor: random() < 0.5 ? Math.round(priceMinor * 0.95) : null,
        priorPrices: [],
      };
    })
    .map((offer) => ({ ...offer, unit: offer.quantity === null ? null : ("g" as const) }));
  const names = new Map(SHOPS.map(([shopId, name]) => [shopId, { name }]));
  return JSON.stringify(productView(product, offers, names));
}

const lines = Array.from({ length: productCount }, (_, i) => productLine(i));
const bytes = lines.reduce((sum, line) => sum + line.length, 0);
const day = { base: "EUR", date: "2026-12-07", rates: SEED_RATES };

/** Products a step of the list converts and writes at once, as GET /products does a segment's lines (src/catalogue/service.ts). */
const BATCH = 500;
const encoder = new TextEncoder();

/** CPU microseconds per product of one pass over every line as a converted list writes it: converted, joined, encoded. */
function pass(convert: boolean): number {
  const conversion = conversionInto("EUR", day);
  const started = process.cpuUsage();
  let written = 0;
  for (let i = 0; i < lines.length; i += BATCH) {
    const batch = lines.slice(i, i + BATCH);
    written += encoder.encode((convert ? batch.map((line) => convertProductJson(line, conversion)) : batch).join(",")).length;
  }
  const used = process.cpuUsage(started);
  if (written < bytes) throw new Error("the list is shorter than its products");
  return (used.user + used.system) / productCount;
}

/** The median of 7 passes, after 3 to warm the JIT's tiers. */
function median(convert: boolean): number {
  for (let i = 0; i < 3; i++) pass(convert);
  return Array.from({ length: 7 }, () => pass(convert)).sort((a, b) => a - b)[3]!;
}

const [plain, converted] = [median(false), median(true)];
console.log(
  `${productCount} products, ${Math.round(bytes / productCount)} characters each, µs of CPU per product: ${converted.toFixed(2)} ` +
    `converted, joined and encoded; ${plain.toFixed(2)} joined and encoded as they are; so ${(converted - plain).toFixed(2)} converting`,
);
