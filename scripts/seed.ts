/**
 * `npm run seed -- [--products N] [--seed S] [--now ISO] [--out FILE] [--persist-to DIR] [--no-apply]`
 *
 * Writes a realistic sample catalogue into the local D1: competitors in USD, GBP, EUR and JPY,
 * N products (default 300; real product lines at their list prices, coffee in pack sizes) with 1–6 offers each (some out
 * of stock, some on sale, some with shipping, some from marketplace sellers or refurbished, a few whose last check failed), a few history rows per offer ending within the last 12 days, `checked_at` within
 * the last hour, and the events of the changes inside the events feed's 30 days (up to 1,000 products), all relative to --now
 * (default: the time of the run), and that day's reference rates (EUR base) for `?currency=`. The same --seed gives the same products, SKUs, ids and prices; the same
 * --seed and --now the same rows (event ids are random, as an ingestion's are). No network. The SQL goes to a file
 * (default .wrangler/seed.sql) and, unless --no-apply, into the local D1 after the migrations, in parts of
 * 50,000 products (so a million products seed in bounded memory; about 1 s per 1,000 products locally).
 * Re-running replaces the catalogue and its events (their rows are deleted first), moves the catalogue
 * version and asks for a full snapshot build (reset_version): a worker started afterwards builds it on its
 * first request (each isolate pokes the builder once), a running one at the next cron sweep (docs/catalogue.md).
 */
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import type { OfferRow, ProductRow } from "../src/catalogue/views.ts";
import type { EventMessage } from "../src/events/messages.ts";
import { outboxRows } from "../src/events/outbox-rows.ts";
import { RETENTION_MS } from "../src/events/retention.ts";
import { PUBLISHED_RATES_KEY } from "../src/fx-rates/published.ts";
import { priceEvent, stockEvent } from "../src/observations/events.ts";
import { afterPriceChange } from "../src/observations/prior-prices.ts";
import { newId } from "../src/platform/ids.ts";
import type { PriorPrice, priceHistory } from "../src/platform/tables.ts";
import { DAY_MS, HOUR_MS } from "../src/platform/time.ts";
import { type ProductLine, SHOP_CURRENCIES, type ShopCurrency, shopPrice } from "../src/sandbox/world.ts";
import { mulberry32 } from "./seeded-random.ts";

const { values: args } = parseArgs({
  options: {
    products: { type: "string", default: "300" },
    seed: { type: "string", default: "42" },
    now: { type: "string", default: new Date().toISOString() },
    out: { type: "string", default: ".wrangler/seed.sql" },
    "persist-to": { type: "string" },
    "no-apply": { type: "boolean", default: false },
  },
});

const productCount = Number(args.products);
const now = Date.parse(args.now);
if (!Number.isInteger(productCount) || productCount < 0) fail("--products must be a whole number, e.g. --products 1000.");
if (Number.isNaN(now)) fail("--now must be an ISO-8601 date-time, e.g. 2026-11-01T00:00:00Z.");

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

// ---- Deterministic randomness (mulberry32) -------------------------------------------------------

const random = mulberry32(Number(args.seed));
/**
 * A second stream for what the sample gained later (pack sizes, sellers, conditions, failed checks): drawing those from
 * the first would move every later draw, and with them the products, SKUs and prices the README's examples name.
 */
const extra = mulberry32(Number(args.seed) ^ 0x5eed);
const pickExtra = <T>(items: ArrayLike<T>): T => items[Math.floor(extra() * items.length)]!;
const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
const pick = <T>(items: ArrayLike<T>): T => items[Math.floor(random() * items.length)]!;
const chance = (p: number) => random() < p;
const ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
const token = (length: number, alphabet = ALNUM) => Array.from({ length }, () => pick(alphabet)).join("");
/** `length` bytes from the seeded sequence, for newId: the sample's ids look like every other id, and repeat with --seed. */
const randomBytes = (length: number) => Uint8Array.from({ length }, () => int(0, 255));

// ---- The sample world --------------------------------------------------------------------------

interface Competitor {
  id: string;
  name: string;
  domain: string;
  currency: ShopCurrency;
}

/** The seed's own price endings: its random draws, and so every product after the first price, stay as they were. */
const SEED_PRICE_ENDINGS = [99, 99, 99, 49, 0, 95];

const COMPETITORS: Competitor[] = [
  { id: "cmp_amazon", name: "Amazon", domain: "amazon.com", currency: "USD" },
  { id: "cmp_walmart", name: "Walmart", domain: "walmart.com", currency: "USD" },
  { id: "cmp_bestbuy", name: "Best Buy", domain: "bestbuy.com", currency: "USD" },
  { id: "cmp_target", name: "Target", domain: "target.com", currency: "USD" },
  { id: "cmp_newegg", name: "Newegg", domain: "newegg.com", currency: "USD" },
  { id: "cmp_argos", name: "Argos", domain: "argos.co.uk", currency: "GBP" },
  { id: "cmp_currys", name: "Currys", domain: "currys.co.uk", currency: "GBP" },
  { id: "cmp_mediamarkt", name: "MediaMarkt", domain: "mediamarkt.de", currency: "EUR" },
  { id: "cmp_fnac", name: "Fnac", domain: "fnac.com", currency: "EUR" },
  { id: "cmp_rakuten", name: "Rakuten", domain: "rakuten.co.jp", currency: "JPY" },
];

const COLOURS = [
  ["Black", 1],
  ["White", 1],
  ["Silver", 1],
  ["Blue", 1],
] as const;

/**
 * What the shops sell: per category, real product lines with their list price in USD and the variants
 * they come in (a variant's factor scales the price: a bigger screen, more storage). A product is a
 * line in one variant; the same line recurs in other variants under other SKUs, as in a real catalogue.
 * (Product lines as the sandbox describes its own: src/sandbox/world.ts.)
 */
const CATEGORIES: readonly ProductLine[] = [
  {
    category: "Headphones",
    code: "HP",
    lines: [
      ["Sony", "WH-1000XM5 Wireless Noise Cancelling Headphones", 399.99],
      ["Sony", "WF-1000XM5 True Wireless Earbuds", 299.99],
      ["Sony", "WH-CH720N Wireless Headphones", 149.99],
      ["Bose", "QuietComfort Ultra Headphones", 429],
      ["Bose", "QuietComfort Ultra Earbuds", 299],
      ["Sennheiser", "Momentum 4 Wireless Headphones", 379.95],
      ["Sennheiser", "Accentum Plus Wireless Headphones", 229.95],
      ["Apple", "AirPods Pro 2 with USB-C Charging Case", 249],
      ["Apple", "AirPods Max", 549],
      ["JBL", "Tune 770NC Wireless Headphones", 129.95],
      ["JBL", "Live Beam 3 True Wireless Earbuds", 199.95],
    ],
    variants: COLOURS,
  },
  {
    category: "Televisions",
    code: "TV",
    lines: [
      ["Samsung", "QN90D Neo QLED 4K Smart TV", 1399.99],
      ["Samsung", "DU7200 Crystal UHD 4K Smart TV", 449.99],
      ["LG", "C4 OLED evo 4K Smart TV", 1499.99],
      ["LG", "QNED80 4K Smart TV", 699.99],
      ["Sony", "BRAVIA 7 Mini LED 4K Google TV", 1299.99],
      ["TCL", "QM8 QD-Mini LED 4K Google TV", 999.99],
      ["Hisense", "U8N Mini-LED 4K Google TV", 899.99],
    ],
    variants: [
      ['55"', 1],
      ['65"', 1.45],
      ['75"', 2],
    ],
  },
  {
    category: "Laptops",
    code: "LT",
    lines: [
      ["Apple", 'MacBook Air 13" M3', 1099],
      ["Apple", 'MacBook Pro 14" M4', 1599],
      ["Dell", "XPS 13 Laptop", 999.99],
      ["Dell", "Inspiron 15 Laptop", 549.99],
      ["Lenovo", "ThinkPad X1 Carbon Gen 12", 1649],
      ["Lenovo", "IdeaPad Slim 5 14", 699.99],
      ["HP", "Spectre x360 14 2-in-1 Laptop", 1449.99],
      ["HP", "Pavilion 15 Laptop", 599.99],
      ["ASUS", "Zenbook 14 OLED", 899.99],
      ["ASUS", "ROG Strix G16 Gaming Laptop", 1499.99],
    ],
    variants: [
      ["16GB RAM, 512GB SSD", 1],
      ["16GB RAM, 1TB SSD", 1.2],
      ["32GB RAM, 1TB SSD", 1.45],
    ],
  },
  {
    category: "Smartphones",
    code: "PH",
    lines: [
      ["Apple", "iPhone 16", 799],
      ["Apple", "iPhone 16 Pro", 999],
      ["Samsung", "Galaxy S24", 799.99],
      ["Samsung", "Galaxy A55 5G", 449.99],
      ["Google", "Pixel 9", 799],
      ["Google", "Pixel 8a", 499],
      ["OnePlus", "12", 799.99],
      ["Xiaomi", "Redmi Note 13 Pro 5G", 329.99],
    ],
    variants: [
      ["128GB", 1],
      ["256GB", 1.13],
      ["512GB", 1.38],
    ],
  },
  {
    category: "Kitchen",
    code: "KT",
    lines: [
      ["Breville", "Barista Express Espresso Machine", 699.95],
      ["Breville", "Bambino Plus Espresso Machine", 499.95],
      ["De'Longhi", "Magnifica Evo Automatic Espresso Machine", 549.95],
      ["Ninja", "Foodi DualZone Air Fryer, 8 qt", 199.99],
      ["Ninja", "Professional Plus Blender", 119.99],
      ["KitchenAid", "Artisan 5 qt Tilt-Head Stand Mixer", 449.99],
      ["Philips", "3000 Series Air Fryer XL", 119.95],
      ["Philips", "2200 Series Fully Automatic Espresso Machine", 449.95],
    ],
    variants: COLOURS,
  },
  {
    category: "Cameras",
    code: "CM",
    lines: [
      ["Canon", "EOS R6 Mark II Mirrorless Camera Body", 2499],
      ["Canon", "EOS R50 Mirrorless Camera with RF-S 18-45mm Lens", 679],
      ["Nikon", "Z6 III Mirrorless Camera Body", 2499.95],
      ["Nikon", "Z50 II Mirrorless Camera with 16-50mm Lens", 859.95],
      ["Sony", "Alpha 7 IV Full-Frame Mirrorless Camera Body", 2499.99],
      ["Sony", "ZV-E10 II Vlog Camera", 999.99],
      ["Fujifilm", "X-T5 Mirrorless Camera Body", 1699.95],
      ["Fujifilm", "X100VI Digital Camera", 1599.95],
    ],
    variants: [
      ["Black", 1],
      ["Silver", 1],
    ],
  },
  {
    category: "Gaming",
    code: "GM",
    lines: [
      ["Nintendo", "Switch OLED Model", 349.99],
      ["Nintendo", "Switch Pro Controller", 69.99],
      ["Sony", "PlayStation 5 Slim Console", 499.99],
      ["Sony", "DualSense Wireless Controller", 74.99],
      ["Microsoft", "Xbox Series X Console", 499.99],
      ["Microsoft", "Xbox Wireless Controller", 59.99],
      ["Logitech", "G PRO X SUPERLIGHT 2 Wireless Gaming Mouse", 159.99],
      ["Logitech", "G502 X Gaming Mouse", 79.99],
      ["Razer", "DeathAdder V3 Pro Wireless Gaming Mouse", 149.99],
      ["Razer", "BlackShark V2 Pro Wireless Gaming Headset", 199.99],
    ],
    variants: [
      ["Black", 1],
      ["White", 1],
    ],
  },
  {
    category: "Home",
    code: "HM",
    lines: [
      ["Dyson", "V15 Detect Cordless Vacuum", 749.99],
      ["Dyson", "V8 Cordless Vacuum", 399.99],
      ["Dyson", "Purifier Cool TP07", 569.99],
      ["iRobot", "Roomba j7+ Self-Emptying Robot Vacuum", 599.99],
      ["iRobot", "Roomba Combo i5 Robot Vacuum and Mop", 399.99],
      ["Shark", "Navigator Lift-Away Upright Vacuum", 199.99],
      ["Shark", "AI Ultra Robot Vacuum", 449.99],
      ["Philips", "Series 2000i Air Purifier", 399.95],
    ],
    variants: [
      ["", 1],
      ["with extra filter", 1.08],
    ],
  },
  {
    category: "Wearables",
    code: "WR",
    lines: [
      ["Apple", "Watch Series 10 GPS", 399],
      ["Apple", "Watch SE GPS", 249],
      ["Garmin", "Forerunner 265 GPS Running Smartwatch", 449.99],
      ["Garmin", "fenix 8 AMOLED Multisport GPS Watch", 999.99],
      ["Fitbit", "Charge 6 Fitness Tracker", 159.95],
      ["Fitbit", "Versa 4 Fitness Smartwatch", 199.95],
      ["Samsung", "Galaxy Watch7 Bluetooth", 299.99],
      ["Samsung", "Galaxy Watch Ultra LTE", 649.99],
    ],
    variants: [
      ["41mm", 1],
      ["45mm", 1.08],
    ],
  },
];

/** Sold by weight, each variant a pack size (unit prices per kg): every 50th product from the 22nd, drawn from `extra`. */
const COFFEE: ProductLine = {
  category: "Coffee",
  code: "CF",
  lines: [
    ["Lavazza", "Super Crema Whole Bean Coffee", 27.99],
    ["Illy", "Classico Ground Coffee, Medium Roast", 39.99],
    ["Starbucks", "Pike Place Roast Whole Bean Coffee", 29.99],
    ["Peet's", "Major Dickason's Blend Ground Coffee", 31.99],
  ],
  variants: [
    ["250 g", 0.3],
    ["500 g", 0.55],
    ["1 kg", 1],
  ],
};
const isCoffee = (i: number) => i % 50 === 21;

/** The pack size a variant names ("250 g", "1 kg", "2-pack"), as an observation's quantity and unit; none for others. */
function packOf(variant: string): Pick<OfferRow, "quantity" | "unit"> {
  const weight = /^(\d+(?:\.\d+)?) (g|kg)$/.exec(variant);
  if (weight) return { quantity: weight[1]!, unit: weight[2] as "g" | "kg" };
  const pack = /^(\d+)-pack$/.exec(variant);
  return pack ? { quantity: pack[1]!, unit: "count" } : { quantity: null, unit: null };
}

/** Third-party sellers on the marketplaces (a marketplace's own offers name no seller). */
const MARKETPLACES = new Set(["cmp_amazon", "cmp_walmart", "cmp_newegg", "cmp_rakuten", "cmp_fnac"]);
const SELLERS = ["TechDeals Direct", "Gadget Outlet", "BrightStar Electronics", "NordicSound Trading", "Kyoto Camera Store"];

/** A day of reference rates (EUR base), written beside the catalogue so ?currency= works on the sample. */
const SAMPLE_RATES = { USD: "1.0832", GBP: "0.8571", JPY: "162.45", CHF: "0.9412", CAD: "1.5148", AUD: "1.6623", KWD: "0.3331" };

/**
 * Categories of a known share, for the filtered-read bench (bench/modes/catalogue-filters.ts asks for them by name): 1 % of the
 * products are "Drones" and 10 % "Accessories", by their place in the sequence (ids are random, so
 * they fall in every segment); the rest are drawn from CATEGORIES.
 */
const SHARED_CATEGORIES: Record<"1%" | "10%", ProductLine> = {
  "1%": {
    category: "Drones",
    code: "DR",
    lines: [
      ["DJI", "Mini 4 Pro Drone with RC 2", 959],
      ["DJI", "Air 3S Drone", 1099],
      ["DJI", "Avata 2 FPV Drone Fly More Combo", 999],
      ["Autel", "EVO Lite+ Drone", 1049],
    ],
    variants: [["", 1]],
  },
  "10%": {
    category: "Accessories",
    code: "AC",
    lines: [
      ["Anker", "Nano Charger 30W USB-C", 19.99],
      ["Anker", "737 Power Bank 24,000mAh", 109.99],
      ["Belkin", "BoostCharge Pro 3-in-1 Wireless Charger with MagSafe", 129.99],
      ["Samsung", "T7 Shield Portable SSD", 119.99],
      ["SanDisk", "Extreme PRO SDXC UHS-I Card", 39.99],
      ["Logitech", "MX Master 3S Wireless Mouse", 99.99],
      ["Apple", "USB-C to Lightning Cable (1 m)", 19],
    ],
    variants: [
      ["", 1],
      ["2-pack", 1.8],
    ],
  },
};
const sharedProductLine = (i: number) => (i % 100 === 7 ? SHARED_CATEGORIES["1%"] : i % 10 === 3 ? SHARED_CATEGORIES["10%"] : undefined);

const iso = (ms: number) => new Date(ms).toISOString();
const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");

function gtin13(): string {
  const body = `0${token(11, "0123456789")}`;
  const sum = [...body].reduce((acc, digit, i) => acc + Number(digit) * (i % 2 ? 3 : 1), 0);
  return body + ((10 - (sum % 10)) % 10);
}

/** The events feed's window (src/events/retention.ts): the seed writes events for the changes inside it. */
const FEED_WINDOW_MS = RETENTION_MS;
/**
 * Events for the changes inside the feed's window, up to this many products (the default 300 and the bench's hot-path
 * catalogue of 1,000: about 6 events a product). The catalogue bench's larger ones skip them: they read no events,
 * and their seed time stays comparable with earlier runs (a million products would make millions of rows for nothing).
 */
const EVENTS_UP_TO_PRODUCTS = 1_000;

/**
 * Each category's line-and-variant pairs are dealt in a shuffled order, so no two products share a name until
 * every pair is used; then the deck is dealt again as renewed, then open-box listings, as shops list them.
 */
const RELISTED = [" (Renewed)", " (Open Box)"];
const decks = new Map<
  ProductLine,
  { deck: { brand: string; line: string; listUsd: number; variant: string; factor: number }[]; round: number }
>();
function nextListing(category: ProductLine) {
  let state = decks.get(category);
  if (!state?.deck.length) {
    const pairs = category.lines.flatMap(([brand, line, listUsd]) =>
      category.variants.map(([variant, factor]) => ({ brand, line, listUsd, variant, factor })),
    );
    state = { deck: shuffled(pairs), round: (state?.round ?? -1) + 1 };
    decks.set(category, state);
  }
  return { ...state.deck.pop()!, round: state.round };
}

// ---- Rows ------------------------------------------------------------------------------------------

interface Rows {
  products: ProductRow[];
  offers: OfferRow[];
  price_history: (typeof priceHistory.$inferInsert)[];
  events: EventMessage[];
}

/** Product `i` (its place in the sequence of random draws), its offers, their history and events, into `tables`. */
function addProduct(i: number, tables: Rows) {
  const category = sharedProductLine(i) ?? pick(CATEGORIES);
  const drawn = nextListing(category);
  // Drawn either way, so the first stream moves as it always did.
  const coffee = isCoffee(i) ? { line: pickExtra(COFFEE.lines), variant: pickExtra(COFFEE.variants) } : undefined;
  const { brand, line, listUsd, variant, factor, round } = coffee
    ? {
        brand: coffee.line[0],
        line: coffee.line[1],
        listUsd: coffee.line[2],
        variant: coffee.variant[0],
        factor: coffee.variant[1],
        round: 0,
      }
    : drawn;
  const name = `${brand} ${line}${variant ? `, ${variant}` : ""}${RELISTED[round - 1] ?? ""}`;
  const sku = `${brand
    .replace(/[^A-Za-z]/g, "")
    .slice(0, 3)
    .toUpperCase()}-${(coffee ? COFFEE : category).code}-${String(i + 1).padStart(6, "0")}`;
  const mpn = `${brand
    .replace(/[^A-Za-z]/g, "")
    .slice(0, 2)
    .toUpperCase()}${token(6, "0123456789ABCDEFGHJKLMNPRSTUVWXYZ")}`;
  const id = newId("prd", randomBytes);
  // The walks are drawn at the drawn listing's price (a price decides whether a later draw happens), then a coffee's
  // are scaled to its own, so the first stream moves as it always did.
  const usdCents = Math.round(drawn.listUsd * drawn.factor * 100);
  const scale = Math.round(listUsd * factor * 100) / usdCents;

  const offerCount = Math.min(COMPETITORS.length, pick([1, 2, 2, 3, 3, 3, 4, 4, 5, 6]));
  const sellers = shuffled(COMPETITORS).slice(0, offerCount);
  const offerRows: {
    offer: OfferRow;
    seller: Competitor;
    walk: { price: number; inStock: boolean; at: number }[];
    lowestAt: (number | null)[];
  }[] = [];

  for (const seller of sellers.sort((a, b) => (a.id < b.id ? -1 : 1))) {
    // A short walk of observations, each changing the price (mostly down, as shops discount) or the stock; the last is
    // current. Drawn back from now: the latest 1 hour to 12 days ago, each earlier one 2 to 25 days before it, so most
    // offers changed within the events feed's 30 days and none in the future.
    const steps = int(1, 5);
    const at = [now - HOUR_MS - int(0, 12 * 24) * HOUR_MS - int(0, HOUR_MS)];
    while (at.length < steps) at.unshift(at[0]! - int(2, 25) * DAY_MS - int(0, DAY_MS));
    const walk = [
      {
        price: shopPrice(usdCents * (0.9 + random() * 0.15), seller.currency, random, SEED_PRICE_ENDINGS),
        inStock: chance(0.85),
        at: at[0]!,
      },
    ];
    for (const when of at.slice(1)) {
      const last = walk.at(-1)!;
      const price = chance(0.75)
        ? shopPrice(
            (last.price / SHOP_CURRENCIES[seller.currency].rate) * (0.85 + random() * 0.22),
            seller.currency,
            random,
            SEED_PRICE_ENDINGS,
          )
        : last.price;
      walk.push({ price, inStock: price === last.price ? !last.inStock : chance(0.9), at: when });
    }
    const { step } = SHOP_CURRENCIES[seller.currency];
    if (coffee) for (const row of walk) row.price = Math.max(step, Math.round((row.price * scale) / step) * step);
    const current = walk.at(-1)!;
    const lastPriceChange = walk.findLastIndex((row, i) => i === 0 || row.price !== walk[i - 1]!.price);
    const previous = lastPriceChange > 0 ? walk[lastPriceChange - 1] : undefined;
    const regular = chance(0.3)
      ? shopPrice((current.price / SHOP_CURRENCIES[seller.currency].rate) * 1.2, seller.currency, random, SEED_PRICE_ENDINGS)
      : null;
    const shipping = seller.currency === "JPY" ? pick([0, 0, 500, null]) : pick([0, 0, 0, 499, 599, null]);
    // Each price change's lowest_price_30d, as ingestion keeps it (src/observations/prior-prices.ts).
    let prior: { priorPrices: PriorPrice[]; lowestMinor: number | null } = { priorPrices: [], lowestMinor: null };
    const lowestAt = walk.map((row, step) => {
      const before = walk[step - 1];
      if (before && before.price !== row.price) prior = afterPriceChange(prior.priorPrices, before.price, iso(row.at));
      return prior.lowestMinor;
    });
    // A few checks fail (the page is gone, or the shop refused the check): the offer keeps its last price and stock.
    const checkStatus = pickExtra([
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "ok",
      "not_found",
      "blocked",
    ] as const);
    const offer: OfferRow = {
      productId: id,
      competitorId: seller.id,
      url: `https://www.${seller.domain}/p/${slug(name)}-${sku.toLowerCase()}`,
      priceMinor: current.price,
      regularPriceMinor: regular !== null && regular > current.price ? regular : null,
      currency: seller.currency,
      shippingMinor: shipping,
      inStock: current.inStock,
      previousPriceMinor: previous?.price ?? null,
      priceChangedAt: iso(walk[lastPriceChange]!.at),
      checkedAt: iso(now - int(0, 3600) * 1000), // the shops are checked every hour or so
      seller: MARKETPLACES.has(seller.id) && extra() < 0.4 ? pickExtra(SELLERS) : null,
      condition: pickExtra([
        "new",
        "new",
        "new",
        "new",
        "new",
        "new",
        "new",
        "new",
        "new",
        "new",
        "new",
        "new",
        "refurbished",
        "used",
      ] as const),
      ...packOf(variant),
      checkStatus,
      lowestPrice30dMinor: lowestAt.at(-1)!,
      priorPrices: prior.priorPrices,
    };
    offerRows.push({ offer, seller, walk, lowestAt });
    tables.offers.push(offer);
    for (const row of walk) {
      tables.price_history.push({
        productId: id,
        competitorId: seller.id,
        priceMinor: row.price,
        currency: seller.currency,
        inStock: row.inStock,
        observedAt: iso(row.at),
      });
    }
  }

  const firstSeen = Math.min(...offerRows.map(({ walk }) => walk[0]!.at));
  const lastChanged = Math.max(...offerRows.map(({ walk }) => (walk.length > 1 ? walk.at(-1)!.at : 0)));
  const createdAt = firstSeen - int(1, 600) * DAY_MS;
  const product: ProductRow = {
    id,
    sku,
    gtin: chance(0.9) ? gtin13() : null,
    mpn,
    name,
    brand,
    category: (coffee ? COFFEE : category).category,
    url: `https://www.${slug(brand)}.com/products/${mpn.toLowerCase()}`,
    imageUrl: `https://images.pricedata.example/${id}.jpg`,
    createdAt: iso(createdAt),
    updatedAt: iso(Math.max(firstSeen, lastChanged)),
    lastChangedAt: lastChanged > 0 ? iso(lastChanged) : null,
    changedVersion: 0,
  };
  tables.products.push(product);

  // The events an ingestion of each walk would have emitted, built as it builds them (src/observations/events.ts).
  if (productCount > EVENTS_UP_TO_PRODUCTS) return;
  for (const { offer, seller, walk, lowestAt } of offerRows) {
    for (let step = 1; step < walk.length; step++) {
      const [before, after] = [walk[step - 1]!, walk[step]!];
      if (after.at < now - FEED_WINDOW_MS) continue;
      const observed = iso(after.at);
      const state = (row: typeof before): OfferRow => ({
        ...offer,
        priceMinor: row.price,
        inStock: row.inStock,
        checkedAt: observed,
        lowestPrice30dMinor: lowestAt[step]!,
      });
      const context = {
        product,
        competitor: { id: seller.id, name: seller.name, domain: seller.domain },
        offer: state(after),
        now: observed,
      };
      if (after.price !== before.price) tables.events.push(priceEvent(context, state(before)));
      if (after.inStock !== before.inStock) tables.events.push(stockEvent(context, state(before)));
    }
  }
}

// ---- SQL -------------------------------------------------------------------------------------------

type Value = string | number | boolean | null;

/** Each table's columns, and a row's values in their order. */
const TABLES = {
  competitors: {
    columns: "id, name, domain",
    values: (c: Competitor): Value[] => [c.id, c.name, c.domain],
  },
  products: {
    columns: "id, sku, gtin, mpn, name, brand, category, url, image_url, created_at, updated_at, last_changed_at",
    values: (p: ProductRow): Value[] => [
      p.id,
      p.sku,
      p.gtin,
      p.mpn,
      p.name,
      p.brand,
      p.category,
      p.url,
      p.imageUrl,
      p.createdAt,
      p.updatedAt,
      p.lastChangedAt,
    ],
  },
  offers: {
    columns:
      "product_id, competitor_id, url, price_minor, regular_price_minor, currency, shipping_minor, in_stock, previous_price_minor, " +
      "price_changed_at, checked_at, seller, condition, quantity, unit, check_status, lowest_price_30d_minor, prior_prices",
    values: (o: OfferRow): Value[] => [
      o.productId,
      o.competitorId,
      o.url,
      o.priceMinor,
      o.regularPriceMinor,
      o.currency,
      o.shippingMinor,
      o.inStock,
      o.previousPriceMinor,
      o.priceChangedAt,
      o.checkedAt,
      o.seller,
      o.condition,
      o.quantity,
      o.unit,
      o.checkStatus,
      o.lowestPrice30dMinor,
      JSON.stringify(o.priorPrices),
    ],
  },
  price_history: {
    columns: "product_id, competitor_id, price_minor, currency, in_stock, observed_at",
    values: (h: Rows["price_history"][number]): Value[] => [h.productId, h.competitorId, h.priceMinor, h.currency, h.inStock, h.observedAt],
  },
  // Written as an ingestion's outbox writes them (src/events/outbox.ts), already relayed and fanned out at their own
  // time: no webhook existed then, so a webhook made later does not receive the sample's history.
  events: {
    columns: "id, type, timestamp, payload, old_minor, new_minor, created_at, relayed_at, fanned_out_at",
    values: (message: EventMessage): Value[] => {
      const [row] = outboxRows([message], message.event.timestamp);
      return [
        row!.id,
        row!.type,
        row!.timestamp,
        row!.payload,
        row!.oldMinor,
        row!.newMinor,
        row!.createdAt,
        row!.createdAt,
        row!.createdAt,
      ];
    },
  },
};

function literal(value: Value): string {
  if (value === null) return "NULL";
  if (typeof value === "boolean") return value ? "1" : "0";
  if (typeof value === "number") return String(value);
  return `'${value.replaceAll("'", "''")}'`;
}

/** Multi-row INSERTs, each under D1's 100 KB statement limit (SQLITE_TOOBIG beyond it). */
const STATEMENT_BYTES = 90_000;

function inserts<T extends keyof typeof TABLES>(table: T, rows: readonly Parameters<(typeof TABLES)[T]["values"]>[0][]): string[] {
  const { columns, values } = TABLES[table] as { columns: string; values: (row: unknown) => Value[] };
  const head = `INSERT INTO ${table} (${columns}) VALUES\n`;
  const statements: string[] = [];
  let tuples: string[] = [];
  let bytes = head.length;
  for (const row of rows) {
    const tuple = `(${values(row).map(literal).join(", ")})`;
    const size = Buffer.byteLength(tuple) + 2;
    if (tuples.length > 0 && bytes + size > STATEMENT_BYTES) {
      statements.push(`${head}${tuples.join(",\n")};`);
      [tuples, bytes] = [[], head.length];
    }
    tuples.push(tuple);
    bytes += size;
  }
  if (tuples.length > 0) statements.push(`${head}${tuples.join(",\n")};`);
  return statements;
}

/**
 * Products per part. `wrangler d1 execute --local` runs a file as one batch held in memory (about
 * 16 KB per product), and one string holds at most 512 MiB: so the SQL is made, written and applied
 * a part at a time, and a million products take neither a million products' memory nor one string.
 */
const PART_PRODUCTS = 50_000;

/** The SQL in parts: the first also empties the tables and writes the competitors, the last moves the version. */
function* sqlParts(): Generator<{ sql: string; rows: Record<keyof typeof TABLES, number> }> {
  const parts = Math.max(1, Math.ceil(productCount / PART_PRODUCTS));
  for (let part = 0; part < parts; part++) {
    const lines: string[] = [];
    if (part === 0) {
      lines.push(
        "-- Generated by scripts/seed.ts; re-running replaces the catalogue and its events.",
        "DELETE FROM events WHERE account_id IS NULL;",
        "DELETE FROM price_history;",
        "DELETE FROM offers;",
        "DELETE FROM products;",
        "DELETE FROM competitors;",
        ...inserts("competitors", COMPETITORS),
        `INSERT OR REPLACE INTO fx_rates (date, base, rates, updated_at) VALUES (${literal(iso(now).slice(0, 10))}, 'EUR', ` +
          `${literal(JSON.stringify(SAMPLE_RATES))}, ${literal(iso(now))});`,
      );
    }
    const tables: Rows = { products: [], offers: [], price_history: [], events: [] };
    for (let i = part * PART_PRODUCTS; i < Math.min(productCount, (part + 1) * PART_PRODUCTS); i++) addProduct(i, tables);
    // The feed is in commit order: the events go in oldest first, as the ingestions would have written them.
    tables.events.sort((a, b) => (a.event.timestamp < b.event.timestamp ? -1 : 1));
    lines.push(
      ...inserts("products", tables.products),
      ...inserts("offers", tables.offers),
      ...inserts("price_history", tables.price_history),
      ...inserts("events", tables.events),
    );
    if (part === parts - 1) {
      // A new version, never a reset one, and a full snapshot build for it: products were deleted.
      lines.push(
        `INSERT INTO catalogue_state (id, version, reset_version, updated_at) VALUES (1, 1, 1, ${literal(iso(now))}) ` +
          "ON CONFLICT (id) DO UPDATE SET version = version + 1, reset_version = version + 1, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now');",
      );
    }
    const rows = {
      competitors: part === 0 ? COMPETITORS.length : 0,
      products: tables.products.length,
      offers: tables.offers.length,
      price_history: tables.price_history.length,
      events: tables.events.length,
    };
    yield { sql: `${lines.join("\n")}\n`, rows };
  }
}

// ---- Write and apply -------------------------------------------------------------------------------

const persist = args["persist-to"] ? ["--persist-to", args["persist-to"]] : [];
function wrangler(...wranglerArgs: string[]) {
  // CI=true keeps wrangler from asking questions; `wrangler` is on PATH under `npm run`.
  // Its stdout is a JSON result per statement: shown only when something failed.
  const result = spawnSync("wrangler", [...wranglerArgs, ...persist], {
    stdio: ["inherit", "pipe", "inherit"],
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
    env: { ...process.env, CI: "true" },
  });
  if (result.status !== 0) {
    process.stdout.write(result.stdout ?? "");
    fail(`\`wrangler ${wranglerArgs.join(" ")}\` failed; see above.`);
  }
}

const apply = !args["no-apply"];
const started = performance.now();
const seconds = () => `${((performance.now() - started) / 1000).toFixed(1)} s`;
mkdirSync(dirname(args.out), { recursive: true });
if (apply) for (const binding of ["DB", "ALERTS_DB"]) wrangler("d1", "migrations", "apply", binding, "--local");
// Each part is applied as its own batch (file): a run stopped half-way leaves part of the catalogue; run it again.
const partFile = `${args.out}.part`;
const out = openSync(args.out, "w");
const totals = { competitors: 0, products: 0, offers: 0, price_history: 0, events: 0 };
try {
  for (const { sql, rows } of sqlParts()) {
    writeSync(out, sql);
    for (const table of Object.keys(totals) as (keyof typeof totals)[]) totals[table] += rows[table];
    if (!apply) continue;
    writeFileSync(partFile, sql);
    wrangler("d1", "execute", "DB", "--local", "--yes", "--file", partFile);
    if (productCount > PART_PRODUCTS) console.log(`Applied ${totals.products} of ${productCount} products (${seconds()}).`);
  }
} finally {
  closeSync(out);
  rmSync(partFile, { force: true });
}
// The rates R2 holds for `?currency=` (src/fx-rates/service.ts) go with the seeded ones: the first converted read
// publishes these from D1. (The catalogue's bucket as wrangler.toml names it.)
if (apply) wrangler("r2", "object", "delete", `price-data-catalogue/${PUBLISHED_RATES_KEY}`, "--local");
const counts = Object.entries(totals)
  .map(([table, n]) => `${n} ${table}`)
  .join(", ");
console.log(`Wrote ${args.out}: ${counts}${apply ? `; seeded the local D1 in ${seconds()}` : ""}.`);
