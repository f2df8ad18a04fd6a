import { asc, eq, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { catalogueState, competitors, offers, products } from "../platform/tables.ts";
import { unknownProduct } from "./history.ts";
import type { CompetitorView, ProductFilters } from "./schema.ts";
import { productView, type CompetitorRow, type OfferRow } from "./views.ts";

/**
 * The catalogue read side. The catalogue changes only through ingestion, which moves
 * `catalogue_state.version`; each isolate keeps one serialised copy built for a version and asks D1
 * for the version at most once per VERSION_CHECK_INTERVAL_MS. So a request costs no D1 query at all
 * most of the time, one tiny query once a second, and a full read only after a change.
 * Trade-off: another isolate may serve the previous version for up to that interval (plus the one
 * D1 read that checks) after a change; the isolate that ingested calls invalidateCatalogue() and
 * sees its change at once.
 */
export const VERSION_CHECK_INTERVAL_MS = 1000;

// The in-memory copy

/**
 * What filtering needs of a product, and where its JSON sits in the catalogue's body. The product
 * objects are not kept: one encoded copy of the JSON is the least memory a rebuild (old and new copy
 * side by side) needs, which matters at 10,000 products in a 128 MB isolate.
 */
interface ProductEntry {
  id: string;
  sku: string;
  brandKey: string | null;
  categoryKey: string | null;
  competitorIds: ReadonlySet<string>;
  updatedAtMs: number;
  /** Its JSON is `body.subarray(start, end)`. */
  start: number;
  end: number;
}

export interface Catalogue {
  version: number;
  /** Strong ETag of the unfiltered list. */
  etag: string;
  /** `{"products":[…]}`, serialised and UTF-8 encoded once per version. */
  body: Bytes;
  products: readonly ProductEntry[];
  byId: ReadonlyMap<string, ProductEntry>;
  bySku: ReadonlyMap<string, ProductEntry>;
  competitors: Bytes;
}

// workers-types widens TextEncoder's buffer type; Response bodies want a plain ArrayBuffer.
type Bytes = Uint8Array<ArrayBuffer>;
const encoder = new TextEncoder();
const encode = (text: string) => encoder.encode(text) as Bytes;

const key = (text: string | null) => (text === null ? null : text.toLowerCase());

const versionQuery = (db: Database) => db.select({ version: catalogueState.version }).from(catalogueState).where(eq(catalogueState.id, 1));

/** The version that `catalogue_state` holds; 0 before anything was ever ingested or seeded. */
async function readVersion(db: Database): Promise<number> {
  const [row] = await versionQuery(db);
  return row?.version ?? 0;
}

/** Moves the version, in the same D1 batch as the change (ingestion and the tests use this). */
export const bumpCatalogueVersion = (db: Database) =>
  db
    .insert(catalogueState)
    .values({ id: 1, version: 1, updatedAt: new Date().toISOString() })
    .onConflictDoUpdate({ target: catalogueState.id, set: { version: sql`${catalogueState.version} + 1`, updatedAt: sql`excluded.updated_at` } });

/** Reads everything in one batch (one implicit transaction), so the rows match the version read. */
export async function buildCatalogue(db: Database): Promise<Catalogue> {
  const [versionRows, competitorRows, productRows, offerRows] = await db.batch([
    versionQuery(db),
    db.select().from(competitors).orderBy(asc(competitors.id)),
    db.select().from(products).orderBy(asc(products.id)),
    db.select().from(offers).orderBy(asc(offers.productId), asc(offers.competitorId)),
  ]);
  const version = versionRows[0]?.version ?? 0;

  const competitorById = new Map<string, CompetitorRow>(competitorRows.map((row) => [row.id, row]));
  const offerCounts = new Map<string, number>();
  const offersByProduct = new Map<string, OfferRow[]>();
  for (const row of offerRows) {
    offerCounts.set(row.competitorId, (offerCounts.get(row.competitorId) ?? 0) + 1);
    let list = offersByProduct.get(row.productId);
    if (!list) offersByProduct.set(row.productId, (list = []));
    list.push(row);
  }

  // Each product is serialised as soon as it is built, so its objects can go before the next one's.
  const parts: Bytes[] = [];
  const keys = productRows.map((row) => {
    const rows = offersByProduct.get(row.id) ?? [];
    parts.push(encode(JSON.stringify(productView(row, rows, competitorById))));
    return {
      id: row.id,
      sku: row.sku,
      brandKey: key(row.brand),
      categoryKey: key(row.category),
      competitorIds: new Set(rows.map((offer) => offer.competitorId)),
      updatedAtMs: Date.parse(row.updatedAt),
    };
  });
  const { body, starts } = joinProducts(parts);
  const entries: ProductEntry[] = keys.map((entry, i) => ({ ...entry, start: starts[i]!, end: starts[i]! + parts[i]!.length }));

  const competitorViews: CompetitorView[] = competitorRows.map((row) => ({
    id: row.id,
    name: row.name,
    domain: row.domain,
    offer_count: offerCounts.get(row.id) ?? 0,
  }));

  return {
    version,
    etag: `"cat-v${version}"`,
    body,
    products: entries,
    byId: new Map(entries.map((entry) => [entry.id, entry])),
    bySku: new Map(entries.map((entry) => [entry.sku, entry])),
    competitors: encode(JSON.stringify({ competitors: competitorViews })),
  };
}

const OPEN = encode('{"products":[');
const CLOSE = encode("]}");
const COMMA = encode(",");

/** `{"products":[a,b,…]}` from encoded products, and where each one starts in it. */
function joinProducts(parts: readonly Uint8Array[]): { body: Bytes; starts: number[] } {
  const size = OPEN.length + CLOSE.length + parts.reduce((sum, part) => sum + part.length, 0) + Math.max(0, parts.length - 1);
  const body = new Uint8Array(size);
  const starts: number[] = [];
  let at = 0;
  const put = (bytes: Uint8Array) => {
    body.set(bytes, at);
    at += bytes.length;
  };
  put(OPEN);
  parts.forEach((part, i) => {
    if (i > 0) put(COMMA);
    starts.push(at);
    put(part);
  });
  put(CLOSE);
  return { body, starts };
}

const productBytes = (catalogue: Catalogue, entry: ProductEntry) => catalogue.body.subarray(entry.start, entry.end);

// Per-isolate cache

let cached: Catalogue | undefined;
/** When `cached` was last confirmed current; -Infinity again after invalidateCatalogue(). */
let checkedAt = Number.NEGATIVE_INFINITY;
/** Bumped by invalidateCatalogue(), so a check that started before it cannot count as fresh. */
let generation = 0;
/**
 * The refresh that one request is running, so that the others do not all read D1 at once. They
 * never await that request's promise: in workerd, code resumed by a promise that another request's
 * I/O settles runs in that request's context, where the Response it then builds fails ("Cannot
 * perform I/O on behalf of a different request", seen as 500s under load by `npm run bench`), and
 * a promise whose request was cancelled never settles at all. So they serve the copy last confirmed
 * meanwhile or, when there is none (a new isolate, or just invalidated), poll for the result.
 */
let refreshing: { generation: number; since: number } | undefined;
/** A refresh running longer than this is presumed dead (its request was cancelled): no longer waited for. */
const REFRESH_TIMEOUT_MS = 10_000;
const POLL_MS = 10;

/** Call after changing the catalogue: this isolate's next read checks the version at once. */
export function invalidateCatalogue(): void {
  generation++;
  checkedAt = Number.NEGATIVE_INFINITY;
}

/** The current catalogue: the cached copy, rebuilt only when the version in D1 has moved. */
export async function loadCatalogue(db: Database): Promise<Catalogue> {
  for (;;) {
    const now = Date.now();
    if (cached && now - checkedAt < VERSION_CHECK_INTERVAL_MS) return cached;
    const busy = refreshing !== undefined && refreshing.generation === generation && now - refreshing.since < REFRESH_TIMEOUT_MS;
    if (!busy) return refresh(db);
    if (cached && checkedAt !== Number.NEGATIVE_INFINITY) return cached;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

async function refresh(db: Database): Promise<Catalogue> {
  const started = generation;
  const mine = { generation: started, since: Date.now() };
  refreshing = mine;
  try {
    let catalogue = cached;
    if (!catalogue || catalogue.version !== (await readVersion(db))) {
      catalogue = await buildCatalogue(db);
      // A build that finished late must not replace a newer one.
      if (!cached || catalogue.version >= cached.version) cached = catalogue;
    }
    if (generation === started) checkedAt = Date.now();
    return catalogue;
  } finally {
    if (refreshing === mine) refreshing = undefined;
  }
}

// Reads

const FILTER_NAMES = ["sku", "competitor", "brand", "category", "updated_since"] as const;

/** Filter values as they are compared: brand and category ignore case, so "Sony" and "sony" are one filter. */
function normalise(filters: ProductFilters): [string, string][] {
  const normalised: [string, string][] = [];
  for (const name of FILTER_NAMES) {
    const value = filters[name];
    if (value === undefined) continue;
    normalised.push([name, name === "brand" || name === "category" ? value.toLowerCase() : value]);
  }
  return normalised;
}

/** The strong ETag of a (possibly filtered) list: the version, plus a hash of the normalised filters. */
export async function productsEtag(catalogue: Catalogue, filters: ProductFilters): Promise<string> {
  const normalised = normalise(filters);
  if (normalised.length === 0) return catalogue.etag;
  const digest = await crypto.subtle.digest("SHA-256", encode(JSON.stringify(normalised)));
  const hash = [...new Uint8Array(digest, 0, 8)].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `"cat-v${catalogue.version}-${hash}"`;
}

/** `{"products":[…]}` for the filters: the pre-encoded copy when there are none, else the matching subset. */
export function productsBody(catalogue: Catalogue, filters: ProductFilters): Bytes {
  const normalised = new Map(normalise(filters));
  if (normalised.size === 0) return catalogue.body;
  const sku = normalised.get("sku");
  const candidates = sku === undefined ? catalogue.products : [catalogue.bySku.get(sku)].filter((entry) => entry !== undefined);
  const competitor = normalised.get("competitor");
  const brand = normalised.get("brand");
  const category = normalised.get("category");
  const since = normalised.has("updated_since") ? Date.parse(normalised.get("updated_since")!) : undefined;
  const matching = candidates.filter(
    (entry) =>
      (competitor === undefined || entry.competitorIds.has(competitor)) &&
      (brand === undefined || entry.brandKey === brand) &&
      (category === undefined || entry.categoryKey === category) &&
      (since === undefined || entry.updatedAtMs >= since),
  );
  return joinProducts(matching.map((entry) => productBytes(catalogue, entry))).body;
}

/** One product's JSON, from the same copy as the list. */
export function productJson(catalogue: Catalogue, id: string): Bytes {
  const entry = catalogue.byId.get(id);
  if (!entry) throw unknownProduct(id);
  return productBytes(catalogue, entry).slice(); // a copy: the response must not hold the whole body
}

export const competitorsJson = (catalogue: Catalogue): Bytes => catalogue.competitors;

