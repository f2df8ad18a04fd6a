/**
 * What the sandbox's synthetic catalogue is made of (src/sandbox/catalogue.ts draws from it): its own shops, in four
 * currencies, on the reserved `.example` domain so that none is mistaken for a real one, and real product lines at
 * their street prices in USD, each in the variants it is sold in. `npm run seed` (scripts/seed.ts) describes its
 * shops and product lines in the same terms, and prices them with the same shopPrice.
 */

/** The currencies the synthetic shops (the sandbox's, and `npm run seed`'s) sell in. */
export type ShopCurrency = "USD" | "GBP" | "EUR" | "JPY";

export interface SandboxShop {
  id: string;
  name: string;
  domain: string;
  currency: ShopCurrency;
  /** Shipping in the shop's minor units; null: the shop does not say. */
  shipping: number | null;
}

export const SANDBOX_SHOPS: readonly SandboxShop[] = [
  { id: "test_harbor", name: "Harbor Outlet (test)", domain: "harbor-outlet.example", currency: "USD", shipping: 0 },
  { id: "test_kestrel", name: "Kestrel Home (test)", domain: "kestrel-home.example", currency: "GBP", shipping: 399 },
  { id: "test_lindqvist", name: "Lindqvist Markt (test)", domain: "lindqvist-markt.example", currency: "EUR", shipping: 499 },
  { id: "test_meridian", name: "Meridian Direct (test)", domain: "meridian-direct.example", currency: "EUR", shipping: null },
  { id: "test_northwind", name: "Northwind Electronics (test)", domain: "northwind.example", currency: "USD", shipping: 599 },
  { id: "test_sakura", name: "Sakura Denki (test)", domain: "sakura-denki.example", currency: "JPY", shipping: 0 },
];

/** Rough rates from USD cents to each currency's minor units, and the step its prices move in (tens of yen). */
export const SHOP_CURRENCIES = {
  USD: { rate: 1, step: 1 },
  GBP: { rate: 0.79, step: 1 },
  EUR: { rate: 0.92, step: 1 },
  JPY: { rate: 1.5, step: 10 },
} as const satisfies Record<ShopCurrency, { rate: number; step: number }>;

/** The cents a shop's price ends in (x.99, x.49, x.95, whole), as often as each appears here. */
const PRICE_ENDINGS: readonly number[] = [99, 99, 49, 95, 0];

/**
 * A shop-like price in minor units from a price in USD cents, ending in one of `endings` picked by `draw` (a number in
 * [0, 1), asked for only then); tens of yen in JPY, which have no cents.
 */
export function shopPrice(usdCents: number, currency: ShopCurrency, draw: () => number, endings = PRICE_ENDINGS): number {
  const { rate, step } = SHOP_CURRENCIES[currency];
  const raw = Math.max(step * 10, Math.round((usdCents * rate) / step) * step);
  if (currency === "JPY") return raw;
  return Math.floor(raw / 100) * 100 + endings[Math.floor(draw() * endings.length)]!;
}

export interface ProductLine {
  category: string;
  /** The category's part of a SKU: TEST-<code>-0001. */
  code: string;
  lines: readonly (readonly [brand: string, line: string, usd: number])[];
  variants: readonly (readonly [label: string, factor: number])[];
}

const FINISHES = [
  ["Black", 1],
  ["Stainless Steel", 1.05],
  ["White", 1],
] as const;

export const PRODUCT_LINES: readonly ProductLine[] = [
  {
    category: "Coffee Machines",
    code: "CF",
    lines: [
      ["Breville", "Barista Express Espresso Machine", 699.95],
      ["Breville", "Bambino Plus Espresso Machine", 499.95],
      ["De'Longhi", "Magnifica Evo Bean-to-Cup", 699.95],
      ["De'Longhi", "Dedica Arte Espresso Machine", 299.95],
      ["Nespresso", "Vertuo Next by Breville", 179],
      ["Jura", "E8 Automatic Coffee Machine", 1799],
      ["Philips", "3200 Series LatteGo", 799.99],
    ],
    variants: FINISHES,
  },
  {
    category: "Power Tools",
    code: "PT",
    lines: [
      ["DeWalt", "20V MAX XR Brushless Drill/Driver Kit", 219],
      ["DeWalt", "20V MAX Impact Driver Kit", 169],
      ["Makita", "18V LXT Brushless Hammer Drill", 229],
      ["Makita", "18V LXT Circular Saw", 179],
      ["Bosch", "18V Compact Jigsaw", 199],
      ["Milwaukee", "M18 FUEL Hammer Drill Kit", 299],
      ["Ryobi", "ONE+ 18V Cordless Drill Kit", 99.97],
    ],
    variants: [
      ["Tool Only", 0.7],
      ["with 2 Batteries", 1],
      ["with 2 Batteries and Case", 1.15],
    ],
  },
  {
    category: "Monitors",
    code: "MN",
    lines: [
      ["Dell", "UltraSharp U2724D QHD Monitor", 479.99],
      ["Dell", "S2721DGF Gaming Monitor", 299.99],
      ["LG", "UltraGear 27GR95QE OLED Monitor", 999.99],
      ["LG", "27UP850N 4K UHD Monitor", 449.99],
      ["Samsung", "Odyssey G7 Curved Gaming Monitor", 699.99],
      ["ASUS", "ProArt PA278QV Monitor", 329],
      ["BenQ", "PD2705U 4K Designer Monitor", 549],
    ],
    variants: [
      ["27-inch", 1],
      ["32-inch", 1.3],
    ],
  },
  {
    category: "Speakers",
    code: "SP",
    lines: [
      ["Sonos", "Era 100 Smart Speaker", 249],
      ["Sonos", "Beam (Gen 2) Soundbar", 499],
      ["Bose", "SoundLink Flex Bluetooth Speaker", 149],
      ["JBL", "Charge 5 Portable Speaker", 179.95],
      ["Ultimate Ears", "BOOM 3 Portable Speaker", 149.99],
      ["Marshall", "Emberton II Portable Speaker", 169.99],
      ["Bang & Olufsen", "Beosound A1 2nd Gen", 299],
    ],
    variants: [
      ["Black", 1],
      ["Blue", 1],
      ["Sand", 1.02],
    ],
  },
  {
    category: "Vacuum Cleaners",
    code: "VC",
    lines: [
      ["Dyson", "V15 Detect Cordless Vacuum", 749.99],
      ["Dyson", "V8 Origin Cordless Vacuum", 349.99],
      ["Shark", "Stratos Cordless Vacuum", 429.99],
      ["iRobot", "Roomba j7+ Robot Vacuum", 599.99],
      ["Roborock", "S8 Pro Ultra Robot Vacuum", 1599.99],
      ["Miele", "Complete C3 Canister Vacuum", 899],
      ["Bissell", "CrossWave HydroSteam", 349.99],
    ],
    variants: [["", 1]],
  },
  {
    category: "Bicycles",
    code: "BK",
    lines: [
      ["Trek", "FX 2 Disc Hybrid Bike", 949.99],
      ["Trek", "Marlin 5 Mountain Bike", 749.99],
      ["Specialized", "Sirrus 2.0 Hybrid Bike", 850],
      ["Cannondale", "Quick 4 Fitness Bike", 825],
      ["Giant", "Escape 3 City Bike", 560],
      ["Brompton", "C Line Explore Folding Bike", 1850],
    ],
    variants: [
      ["Small", 1],
      ["Medium", 1],
      ["Large", 1],
    ],
  },
  {
    category: "Smart Home",
    code: "SH",
    lines: [
      ["Google", "Nest Learning Thermostat (4th gen)", 279.99],
      ["Amazon", "Echo Show 8 (3rd Gen)", 149.99],
      ["Philips Hue", "White and Color Starter Kit", 199.99],
      ["Ring", "Video Doorbell Pro 2", 249.99],
      ["Arlo", "Pro 5S 2K Security Camera", 249.99],
      ["ecobee", "Smart Thermostat Premium", 249.99],
      ["Eufy", "SoloCam S340 Security Camera", 159.99],
    ],
    variants: [
      ["Single", 1],
      ["2-Pack", 1.85],
    ],
  },
  {
    category: "Board Games",
    code: "BG",
    lines: [
      ["Catan Studio", "Catan Board Game", 54.99],
      ["Days of Wonder", "Ticket to Ride", 54.99],
      ["Stonemaier Games", "Wingspan", 65],
      ["Z-Man Games", "Pandemic", 44.99],
      ["Repos Production", "7 Wonders (2nd Edition)", 59.99],
      ["Lookout Games", "Agricola", 69.99],
      ["CMON", "Azul", 39.99],
    ],
    variants: [
      ["", 1],
      ["with Expansion Bundle", 1.6],
    ],
  },
];
