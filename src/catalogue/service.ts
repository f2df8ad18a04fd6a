import { Buffer } from "node:buffer";
import { constants, crc32, deflateRawSync } from "node:zlib";
import { eq, sql } from "drizzle-orm";
import { hasRate } from "../fx-rates/rates.ts";
import { todaysRates } from "../fx-rates/service.ts";
import { ApiError } from "../http/errors.ts";
import type { Database } from "../platform/db.ts";
import { sha256Hex } from "../platform/hash.ts";
import { onForget } from "../platform/isolate-memory.ts";
import { logger } from "../platform/log.ts";
import { catalogueState, competitors } from "../platform/tables.ts";
import { type Conversion, conversionInto, convertProductJson, ratesTag } from "./converted.ts";
import { filterSet, matchingProducts } from "./filtered.ts";
import { unknownProduct } from "./history.ts";
import type { CompetitorPatch, CompetitorView, ProductFilters } from "./schema.ts";
import { FINAL_BLOCK, GZIP_HEADER, gzipTrailer } from "./snapshot/gzip-member.ts";
import type { Manifest } from "./snapshot/manifest.ts";
import { snapshotProduct } from "./snapshot/product-read.ts";
import { currentManifest, forgetManifest } from "./snapshot/read.ts";

/**
 * The catalogue read side, served from the snapshot in R2 that the CatalogueBuilder object builds
 * (src/catalogue/snapshot/build.ts, docs/catalogue.md). Ingestion moves `catalogue_state.version` and marks the
 * products it changed in the same D1 batch, then pokes the builder.
 */

/** What a request needs to reach the snapshot: the bucket, and a poke for the builder. */
export interface SnapshotAccess {
  bucket: R2Bucket;
  /** Asks the builder to bring the snapshot up to date soon; never waits for the build. */
  poke(): Promise<void>;
  /** When there is no snapshot at all: true once there is one (an empty catalogue's is built at once). */
  ensureSnapshot(): Promise<boolean>;
  /** Asks the builder to keep the converted whole list of a currency and form warm for a day (src/catalogue/converted-list.ts). */
  keepConvertedWarm(currency: string, form: "json" | "ndjson"): Promise<void>;
}

/** Moves the version, in the same D1 batch as the change (ingestion and the tests use this). */
export const bumpCatalogueVersion = (db: Database) =>
  db
    .insert(catalogueState)
    .values({ id: 1, version: 1, updatedAt: new Date().toISOString() })
    .onConflictDoUpdate({
      target: catalogueState.id,
      set: { version: sql`${catalogueState.version} + 1`, updatedAt: sql`excluded.updated_at` },
    });

let pokedFromThisIsolate = false;
onForget(() => {
  pokedFromThisIsolate = false;
});

/**
 * The snapshot to serve. With none at all (a new deployment) the builder makes the first one at once
 * when the catalogue is empty; a catalogue with products but no snapshot yet (a fresh seed) is a 503
 * with Retry-After until the build is done: a request never waits for a build of products.
 */
export async function servingManifest(store: SnapshotAccess): Promise<Manifest> {
  if (!pokedFromThisIsolate) {
    // Heals a change written straight into D1 (the seed) before any cron sweep: once per isolate.
    pokedFromThisIsolate = true;
    await store
      .poke()
      .catch((error: unknown) => logger("catalogue").error("builder poke failed; the sweep will catch up", { error: String(error) }));
  }
  const manifest = await currentManifest(store.bucket);
  if (manifest) return manifest;
  if (await store.ensureSnapshot()) {
    forgetManifest();
    const built = await currentManifest(store.bucket);
    if (built) return built;
  }
  throw new ApiError(503, "The catalogue snapshot is being built; retry in a few seconds.", { "Retry-After": "2" });
}

const FILTER_NAMES = ["sku", "competitor", "brand", "category", "updated_since"] as const;
/** The filters' values: validated (ProductFilters), or as a query string gives them (admission's look before validation). */
type FilterValues = Partial<Record<(typeof FILTER_NAMES)[number], string>>;

/** Filter values as they are compared: brand and category ignore case, so "Sony" and "sony" are one filter. */
function normalise(filters: FilterValues): [string, string][] {
  const normalised: [string, string][] = [];
  for (const name of FILTER_NAMES) {
    const value = filters[name];
    if (value === undefined) continue;
    normalised.push([name, name === "brand" || name === "category" ? value.toLowerCase() : value]);
  }
  return normalised;
}

/** Whether the list is the snapshot's stored bytes as they are: no filter, no conversion. */
export const isFiltered = (filters: ProductFilters) => selectsProducts(filters) || filters.currency !== undefined;

/** Whether the list is some of the products (a filter), not every one. */
export const selectsProducts = (filters: FilterValues) => normalise(filters).length > 0;

/**
 * The conversion a `?currency=` read asks for, with the day's rates as the isolate keeps them: no D1 statement when
 * warm. A currency without a rate today is refused (a 400; a tool error in MCP), not answered with every price null.
 */
export async function conversionOf(
  services: { db: Database; catalogue: SnapshotAccess },
  currency: string | undefined,
): Promise<Conversion | undefined> {
  if (currency === undefined) return undefined;
  const day = await todaysRates(services.db, services.catalogue.bucket);
  if (day === null || !hasRate(day, currency))
    throw new ApiError(
      400,
      `currency: ${currency} has no exchange rate ${day === null ? "yet (none are stored)" : `on ${day.date}`}, so no price can be ` +
        "converted into it; GET /fx-rates lists the currencies that have one.",
    );
  return conversionInto(currency, day);
}

/** The strong ETag of a list: the snapshot's id, a hash of the normalised filters (and of the conversion), and the form. */
export async function productsEtag(
  manifest: Pick<Manifest, "id">,
  filters: ProductFilters,
  form: "json" | "ndjson",
  gzip: boolean,
  conversion?: Conversion,
): Promise<string> {
  const normalised = normalise(filters);
  let tag = `cat-${manifest.id}`;
  if (normalised.length > 0) {
    tag += `-${await sha256Hex(JSON.stringify(normalised), 8)}`;
  }
  // New rates for the day change the body as much as a new snapshot does.
  if (conversion) tag += `-${conversion.currency}-${await ratesTag(conversion)}`;
  if (form === "ndjson") tag += "-nd";
  if (gzip) tag += "-gz";
  return `"${tag}"`;
}

/** The snapshot's own ETag (GET /competitors). */
export const snapshotEtag = (manifest: Manifest) => `"cat-${manifest.id}"`;

const encoder = new TextEncoder();

/**
 * The matching products, as `{"products":[…]}` or NDJSON, a page or a segment at a time (src/catalogue/filtered.ts);
 * with a conversion, each converted (src/catalogue/converted.ts). No filter and a conversion reads every segment.
 */
export async function* filteredProducts(
  bucket: R2Bucket,
  manifest: Manifest,
  { filters, form, conversion }: { filters: ProductFilters; form: "json" | "ndjson"; conversion?: Conversion | undefined },
): AsyncGenerator<Uint8Array> {
  let first = true;
  if (form === "json") yield encoder.encode('{"products":[');
  for await (const matched of matchingProducts(bucket, manifest, filterSet(filters))) {
    const hits = conversion ? matched.map((json) => convertProductJson(json, conversion)) : matched;
    yield encoder.encode(form === "json" ? (first ? "" : ",") + hits.join(",") : hits.map((line) => `${line}\n`).join(""));
    first = false;
  }
  if (form === "json") yield encoder.encode("]}");
}

/** Bytes gathered before a deflate call: each call sets up its own compressor, so small chunks are joined first. */
const DEFLATE_CHUNK = 256 * 1024;

/**
 * The body as ONE gzip member (every client reads it whole), compressed at level 1 a piece of at
 * least DEFLATE_CHUNK bytes at a time: a fraction of CompressionStream's level-6 CPU for a body some
 * 20 % larger (docs/catalogue.md). Each piece ends in a sync flush, so the pieces are one deflate
 * stream (src/catalogue/snapshot/gzip-member.ts); the trailer's CRC-32 runs on over them.
 */
export async function* gzipMember(chunks: AsyncGenerator<Uint8Array>): AsyncGenerator<Uint8Array> {
  yield GZIP_HEADER.slice();
  let body = { crc: 0, length: 0 };
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  const deflate = () => {
    const data = Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    body = { crc: crc32(data, body.crc), length: body.length + data.length };
    return deflateRawSync(data, { level: 1, finishFlush: constants.Z_SYNC_FLUSH });
  };
  for await (const chunk of chunks) {
    pending.push(chunk);
    pendingBytes += chunk.length;
    if (pendingBytes >= DEFLATE_CHUNK) yield deflate();
  }
  if (pendingBytes > 0) yield deflate();
  yield FINAL_BLOCK.slice();
  yield gzipTrailer(body);
}

/**
 * One product (GET /products/:id, the MCP tool get_product): from the snapshot being served, as fresh as the list (a
 * second or two behind an ingestion's answer), with no D1 statement (src/catalogue/snapshot/product-read.ts). An id the
 * snapshot does not hold is a 404, a product created since it was built included: D1 is not asked, so a client
 * trying ids costs it nothing.
 */
export async function productJson(catalogue: SnapshotAccess, id: string, conversion?: Conversion): Promise<string> {
  const manifest = await servingManifest(catalogue);
  const json = await snapshotProduct(catalogue.bucket, manifest, id);
  if (json === undefined) throw unknownProduct(id);
  return conversion ? convertProductJson(json, conversion) : json;
}

/** A strong ETag from a body's bytes. */
export async function contentEtag(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  return `"prd-${await sha256Hex(bytes, 12)}"`;
}

export const competitorsJson = (manifest: Manifest) =>
  encoder.encode(JSON.stringify({ competitors: manifest.competitors })) as Uint8Array<ArrayBuffer>;

/**
 * Renaming a competitor, on purpose (observations never do: src/observations/changes.ts). Every offer's view
 * carries `competitor_name`, so a rename changes the view of every product the competitor sells:
 * instead of marking those products (work that grows with the catalogue, in one request), the same
 * D1 batch moves `catalogue_state.reset_version` to the new version, and the snapshot builder makes
 * one full build, in its own bounded steps (src/catalogue/snapshot/build.ts).
 */
export async function updateCompetitor(
  { db, catalogue }: { db: Database; catalogue: SnapshotAccess },
  { id, patch }: { id: string; patch: CompetitorPatch },
): Promise<CompetitorView> {
  const row = await db.select().from(competitors).where(eq(competitors.id, id)).get();
  if (!row) throw new ApiError(404, `There is no competitor ${JSON.stringify(id)}; GET /competitors lists the ids.`);
  const next = { name: patch.name ?? row.name, domain: patch.domain === undefined ? row.domain : patch.domain };
  if (next.name !== row.name || next.domain !== row.domain) {
    await db.batch([
      db.update(competitors).set(next).where(eq(competitors.id, id)),
      bumpCatalogueVersion(db),
      db
        .update(catalogueState)
        .set({ resetVersion: sql`${catalogueState.version}` })
        .where(eq(catalogueState.id, 1)),
    ]);
    await catalogue
      .poke()
      .catch((error: unknown) => logger("catalogue").error("builder poke failed; the sweep will catch up", { error: String(error) }));
  }
  return { id, ...next, offer_count: await offerCount(catalogue.bucket, id) };
}

/**
 * The competitor's offers in the snapshot being served (as GET /competitors counts them): read from the
 * manifest, so it costs the same at any catalogue size; 0 before the first snapshot. A rename does not change it.
 */
async function offerCount(bucket: R2Bucket, id: string): Promise<number> {
  const manifest = await currentManifest(bucket);
  return manifest?.competitors.find((competitor) => competitor.id === id)?.offer_count ?? 0;
}
