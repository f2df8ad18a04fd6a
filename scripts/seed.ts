/**
 * `npm run seed -- [--products N] [--seed S] [--now ISO] [--out FILE] [--persist-to DIR] [--no-apply]`
 *
 * Writes a realistic sample catalogue into the local D1: competitors in USD, GBP, EUR and JPY,
 * N products (default 300) with 1–6 offers each (some out of stock, some on sale) and a few
 * history rows per offer. Deterministic: the same --seed and --now give the same rows, byte for
 * byte, with no network. The SQL goes to a file (default .wrangler/seed.sql) and, unless
 * --no-apply, into the local D1 after the migrations, in parts of 50,000 products (so a million
 * products seed in bounded memory; about 1 s per 1,000 products locally). Re-running replaces the
 * catalogue (its rows are deleted first), moves the catalogue version and asks for a full snapshot
 * build (reset_version): a worker started afterwards builds it on its first request (each isolate
 * pokes the builder once), a running one at the next cron sweep (docs/catalogue.md).
 */
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    products: { type: "string", default: "300" },
    seed: { type: "string", default: "42" },
    now: { type: "string", default: "2026-11-01T00:00:00.000Z" },
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

let state = Number(args.seed) >>> 0;
function random(): number {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
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

// ---- The sample world --------------------------------------------------------------------------

interface Competitor {
  id: string;
  name: string;
  domain: string;
  currency: "USD" | "GBP" | "EUR" | "JPY";
}

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

/** Rough USD exchange rates, and the step prices move in (JPY prices end in tens of yen). */
const CURRENCIES = {
  USD: { rate: 1, step: 1 },
  GBP: { rate: 0.79, step: 1 },
  EUR: { rate: 0.92, step: 1 },
  JPY: { rate: 1.5, step: 10 }, // USD cents × 1.5 ≈ yen (150 JPY to the dollar)
} as const;

const CATEGORIES = [
  {
    name: "Headphones",
    code: "HP",
    brands: ["Sony", "Bose", "Sennheiser", "Apple", "JBL"],
    nouns: ["Wireless Headphones", "True Wireless Earbuds", "Noise Cancelling Headphones"],
    usd: [29, 449],
  },
  {
    name: "Televisions",
    code: "TV",
    brands: ["Samsung", "LG", "Sony", "TCL", "Hisense"],
    nouns: ['55" 4K TV', '65" OLED TV', '43" Smart TV'],
    usd: [249, 2999],
  },
  {
    name: "Laptops",
    code: "LT",
    brands: ["Apple", "Dell", "Lenovo", "HP", "ASUS"],
    nouns: ["14-inch Laptop", "Ultrabook", "Gaming Laptop"],
    usd: [449, 3499],
  },
  {
    name: "Smartphones",
    code: "PH",
    brands: ["Apple", "Samsung", "Google", "OnePlus", "Xiaomi"],
    nouns: ["Smartphone 128GB", "Smartphone 256GB"],
    usd: [199, 1599],
  },
  {
    name: "Kitchen",
    code: "KT",
    brands: ["Philips", "KitchenAid", "Breville", "De'Longhi", "Ninja"],
    nouns: ["Espresso Machine", "Air Fryer", "Stand Mixer", "Blender"],
    usd: [39, 899],
  },
  {
    name: "Cameras",
    code: "CM",
    brands: ["Canon", "Nikon", "Sony", "Fujifilm"],
    nouns: ["Mirrorless Camera", "Camera Body", "Zoom Lens"],
    usd: [399, 3999],
  },
  {
    name: "Gaming",
    code: "GM",
    brands: ["Nintendo", "Sony", "Microsoft", "Logitech", "Razer"],
    nouns: ["Controller", "Gaming Mouse", "Headset", "Console"],
    usd: [19, 599],
  },
  {
    name: "Home",
    code: "HM",
    brands: ["Dyson", "iRobot", "Shark", "Philips"],
    nouns: ["Cordless Vacuum", "Robot Vacuum", "Air Purifier"],
    usd: [99, 999],
  },
  {
    name: "Wearables",
    code: "WR",
    brands: ["Garmin", "Fitbit", "Apple", "Samsung"],
    nouns: ["Smartwatch", "Fitness Tracker", "GPS Watch"],
    usd: [49, 899],
  },
] as const;

const DAY = 86_400_000;
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

/** A shop-like price in minor units: x.99, x.49 or whole amounts; tens of yen in JPY. */
function shopPrice(usdCents: number, currency: Competitor["currency"]): number {
  const { rate, step } = CURRENCIES[currency];
  const raw = Math.max(step * 10, Math.round((usdCents * rate) / step) * step);
  if (currency === "JPY") return raw;
  const whole = Math.floor(raw / 100);
  return whole * 100 + pick([99, 99, 99, 49, 0, 95]);
}

/**
 * Categories of a known share, for the filtered-read bench (bench/catalogue-filters.ts asks for them by name): 1 % of the
 * products are "Drones" and 10 % "Accessories", by their place in the sequence (ids are random, so
 * they fall in every segment); the rest keep the category they were drawn with.
 */
const SHARED_CATEGORIES = { "1%": "Drones", "10%": "Accessories" } as const;
const benchmarkCategory = (i: number) => (i % 100 === 7 ? SHARED_CATEGORIES["1%"] : i % 10 === 3 ? SHARED_CATEGORIES["10%"] : undefined);

// ---- Rows ------------------------------------------------------------------------------------------

type Value = string | number | boolean | null;
type Rows = Record<"products" | "offers" | "price_history", Value[][]>;

/** Product `i` (its place in the sequence of random draws), its offers and their history, into `tables`. */
function addProduct(i: number, tables: Rows) {
  const category = pick(CATEGORIES);
  const brand = pick(category.brands);
  const model = `${pick(["", "Pro ", "Max ", "Air ", "X", "S"])}${int(1, 9)}${pick(["", "0", "00", "5"])}`;
  const name = `${brand} ${model} ${pick(category.nouns)}`.replace(/\s+/g, " ");
  const sku = `${brand
    .replace(/[^A-Za-z]/g, "")
    .slice(0, 3)
    .toUpperCase()}-${category.code}-${String(i + 1).padStart(6, "0")}`;
  const mpn = `${brand
    .replace(/[^A-Za-z]/g, "")
    .slice(0, 2)
    .toUpperCase()}${token(6, "0123456789ABCDEFGHJKLMNPRSTUVWXYZ")}`;
  const id = `prd_${token(20)}`;
  const [lowUsd, highUsd] = category.usd;
  const usdCents = Math.round(Math.exp(Math.log(lowUsd) + random() * (Math.log(highUsd) - Math.log(lowUsd))) * 100);
  const createdAt = now - int(121, 720) * DAY; // before the first observation (≤ 120 days ago)

  const offerCount = Math.min(COMPETITORS.length, pick([1, 2, 2, 3, 3, 3, 4, 4, 5, 6]));
  const sellers = shuffled(COMPETITORS).slice(0, offerCount);
  let lastChangedAt: number | null = null;

  for (const seller of sellers.sort((a, b) => (a.id < b.id ? -1 : 1))) {
    // A short walk of observations, oldest first, each changing the price or the stock; the last is
    // current. It starts 85–120 days ago and takes at most 4 steps of at most 21 days: never in the future.
    const steps = int(1, 5);
    const walk = [
      { price: shopPrice(usdCents * (0.9 + random() * 0.25), seller.currency), inStock: chance(0.85), at: now - int(85, 120) * DAY },
    ];
    while (walk.length < steps) {
      const last = walk.at(-1)!;
      const price = chance(0.8)
        ? shopPrice((last.price / CURRENCIES[seller.currency].rate) * (0.88 + random() * 0.2), seller.currency)
        : last.price;
      const inStock = price === last.price ? !last.inStock : chance(0.85);
      walk.push({ price, inStock, at: last.at + int(1, 20) * DAY + int(0, DAY) });
    }
    const current = walk.at(-1)!;
    const lastPriceChange = walk.findLastIndex((row, i) => i === 0 || row.price !== walk[i - 1]!.price);
    const previous = lastPriceChange > 0 ? walk[lastPriceChange - 1] : undefined;
    const regular = chance(0.3) ? shopPrice((current.price / CURRENCIES[seller.currency].rate) * 1.2, seller.currency) : null;
    const shipping = seller.currency === "JPY" ? pick([0, 0, 500, null]) : pick([0, 0, 0, 499, 599, null]);
    lastChangedAt = Math.max(lastChangedAt ?? 0, current.at);

    tables.offers.push([
      id,
      seller.id,
      `https://www.${seller.domain}/p/${slug(name)}-${sku.toLowerCase()}`,
      current.price,
      regular !== null && regular > current.price ? regular : null,
      seller.currency,
      shipping,
      current.inStock,
      previous?.price ?? null,
      iso(walk[lastPriceChange]!.at),
      iso(now - int(0, 6 * 3600) * 1000),
    ]);
    for (const row of walk) tables.price_history.push([id, seller.id, row.price, seller.currency, row.inStock, iso(row.at)]);
  }

  tables.products.push([
    id,
    sku,
    chance(0.9) ? gtin13() : null,
    mpn,
    name,
    brand,
    benchmarkCategory(i) ?? category.name,
    `https://www.${slug(brand)}.com/products/${mpn.toLowerCase()}`,
    `https://images.pricedata.example/${id}.jpg`,
    iso(createdAt),
    iso(Math.max(createdAt, lastChangedAt ?? createdAt)),
    lastChangedAt === null ? null : iso(lastChangedAt),
  ]);
}

// ---- SQL -------------------------------------------------------------------------------------------

const COLUMNS: Record<"competitors" | keyof Rows, string> = {
  competitors: "id, name, domain",
  products: "id, sku, gtin, mpn, name, brand, category, url, image_url, created_at, updated_at, last_changed_at",
  offers:
    "product_id, competitor_id, url, price_minor, regular_price_minor, currency, shipping_minor, in_stock, previous_price_minor, price_changed_at, checked_at",
  price_history: "product_id, competitor_id, price_minor, currency, in_stock, observed_at",
};

function literal(value: Value): string {
  if (value === null) return "NULL";
  if (typeof value === "boolean") return value ? "1" : "0";
  if (typeof value === "number") return String(value);
  return `'${value.replaceAll("'", "''")}'`;
}

/** Multi-row INSERTs, each well under D1's 100 KB statement limit. */
const ROWS_PER_INSERT = 200;

function inserts(table: keyof typeof COLUMNS, rows: readonly Value[][]): string[] {
  const statements: string[] = [];
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
    const values = rows.slice(start, start + ROWS_PER_INSERT).map((row) => `(${row.map(literal).join(", ")})`);
    statements.push(`INSERT INTO ${table} (${COLUMNS[table]}) VALUES\n${values.join(",\n")};`);
  }
  return statements;
}

/**
 * Products per part. `wrangler d1 execute --local` runs a file as one batch held in memory (about
 * 16 KB per product), and one string holds at most 512 MiB: so the SQL is made, written and applied
 * a part at a time, and a million products take neither a million products' memory nor one string.
 */
const PART_PRODUCTS = 50_000;

/** The SQL in parts: the first also empties the tables and writes the competitors, the last moves the version. */
function* sqlParts(): Generator<{ sql: string; rows: Record<keyof typeof COLUMNS, number> }> {
  const parts = Math.max(1, Math.ceil(productCount / PART_PRODUCTS));
  for (let part = 0; part < parts; part++) {
    const lines: string[] = [];
    if (part === 0) {
      lines.push(
        "-- Generated by scripts/seed.ts; re-running replaces the catalogue.",
        "DELETE FROM price_history;",
        "DELETE FROM offers;",
        "DELETE FROM products;",
        "DELETE FROM competitors;",
        ...inserts(
          "competitors",
          COMPETITORS.map((c) => [c.id, c.name, c.domain]),
        ),
      );
    }
    const tables: Rows = { products: [], offers: [], price_history: [] };
    for (let i = part * PART_PRODUCTS; i < Math.min(productCount, (part + 1) * PART_PRODUCTS); i++) addProduct(i, tables);
    for (const table of ["products", "offers", "price_history"] as const) lines.push(...inserts(table, tables[table]));
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
if (apply) wrangler("d1", "migrations", "apply", "DB", "--local");
// Each part is applied as its own batch (file): a run stopped half-way leaves part of the catalogue; run it again.
const partFile = `${args.out}.part`;
const out = openSync(args.out, "w");
const totals = { competitors: 0, products: 0, offers: 0, price_history: 0 };
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
const counts = Object.entries(totals)
  .map(([table, n]) => `${n} ${table}`)
  .join(", ");
console.log(`Wrote ${args.out}: ${counts}${apply ? `; seeded the local D1 in ${seconds()}` : ""}.`);
