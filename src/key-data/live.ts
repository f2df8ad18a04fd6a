import { catalogueFacts } from "../alerts/match.ts";
import { convertedCatalogue, INLINE_CONVERTED_SEGMENTS, unconvertedSegments } from "../catalogue/converted-list.ts";
import { productHistory } from "../catalogue/history.ts";
import { getProduct, searchProducts } from "../catalogue/search.ts";
import {
  competitorsJson,
  filteredProducts,
  gzipMember,
  isFiltered,
  productJson,
  productsEtag,
  selectsProducts,
  servingManifest,
  snapshotEtag,
} from "../catalogue/service.ts";
import { streamOf, wholeCatalogue } from "../catalogue/snapshot/read.ts";
import { RETENTION_MS } from "../events/retention.ts";
import { listEvents, listEventsNewestFirst, newestCatalogueEventId } from "../events/service.ts";
import { todaysRates } from "../fx-rates/service.ts";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import { isSandboxProduct, sandboxProductOnLiveKey } from "../sandbox/mix-ups.ts";
import type { KeyData } from "./door.ts";
import { catalogueExportStart, catalogueExportStep, changesExportStart, changesExportStep } from "./live-export.ts";

type LiveServices = Pick<RequestServices, "db" | "alerts" | "replica" | "archive" | "catalogue" | "afterAnswer">;

/**
 * A live key's data: the catalogue's published snapshot (R2, and what the isolate keeps of it), D1's feed and the
 * archives. Pages of the feed and history may come from a read replica (RequestServices.replica); an export's steps
 * (src/key-data/live-export.ts) read the primary.
 */
export function liveData(services: LiveServices): KeyData {
  // Each binding is reached when a read needs it (RequestServices builds them on first use), never for the door itself.
  return {
    environment: "live",
    async productList({ filters, form, gzip, conversion }) {
      const { catalogue } = services;
      const manifest = await servingManifest(catalogue);
      const etag = await productsEtag(manifest, filters, form, gzip, conversion);
      if (!isFiltered(filters)) return { etag, body: () => wholeCatalogue(catalogue.bucket, manifest, form, gzip) };
      if (conversion && !selectsProducts(filters)) {
        // A piece this response had to convert: kept after the answer, and the builder asked to keep the currency warm.
        let warmAsked = false;
        const askWarm = () => {
          if (warmAsked) return;
          warmAsked = true;
          services.afterAnswer(catalogue.keepConvertedWarm(conversion.currency, form));
        };
        // More pieces than a response may convert: a 503 while the builder converts them in its own steps.
        const missing = await unconvertedSegments(catalogue.bucket, manifest, conversion, form);
        if (missing > INLINE_CONVERTED_SEGMENTS) {
          askWarm();
          throw new ApiError(
            503,
            `The whole catalogue in ${conversion.currency} is being converted (${missing} of ${manifest.segments.length} parts left); retry after Retry-After seconds, or filter the list.`,
            { "Retry-After": "30" },
          );
        }
        const keep = (put: Promise<unknown>) => {
          services.afterAnswer(put);
          askWarm();
        };
        return { etag, body: () => convertedCatalogue(catalogue.bucket, manifest, { conversion, form, gzip }, keep) };
      }
      return {
        etag,
        body: () => {
          const body = filteredProducts(catalogue.bucket, manifest, { filters, form, conversion });
          return streamOf(gzip ? gzipMember(body) : body);
        },
      };
    },
    productJson: (id, conversion) => namingSandbox(productJson(services.catalogue, id, conversion), { id }),
    getProduct: (input) => namingSandbox(getProduct(services, input), input),
    searchProducts: (input) => searchProducts(services, input),
    fxRates: () => todaysRates(services.db, services.catalogue.bucket),
    history: (productId, query) => namingSandbox(productHistory(services.replica, services.archive, productId, query), { id: productId }),
    async competitors() {
      const manifest = await servingManifest(services.catalogue);
      return { etag: snapshotEtag(manifest), list: manifest.competitors, json: () => competitorsJson(manifest) };
    },
    feed: (query, { newestFirst = false, latest = false } = {}) =>
      (newestFirst ? listEventsNewestFirst : listEvents)(latest ? services.db : services.replica, services.archive, query),
    retentionMs: RETENTION_MS,
    newestEventId: () => newestCatalogueEventId(services.db),
    get facts() {
      return catalogueFacts(services);
    },
    exportCatalogueStart: () => catalogueExportStart(services),
    exportChangesStart: (span) => changesExportStart(services, span),
    exportCatalogue: (cursor, limits) => catalogueExportStep(services, cursor, limits),
    exportChanges: (cursor, limits) => changesExportStep(services, cursor, limits),
  };
}

/** A live key's 404 for a product of the sandbox says so (the sandbox is looked at only then, never on a hit). */
async function namingSandbox<T>(read: Promise<T>, product: { id?: string | undefined; sku?: string | undefined }): Promise<T> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404 && isSandboxProduct(product))
      throw sandboxProductOnLiveKey(product.id ?? `sku ${product.sku}`);
    throw error;
  }
}
