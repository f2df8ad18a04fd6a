import { summariseIn } from "../catalogue/converted.ts";
import type { ProductView } from "../catalogue/schema.ts";
import { productMatch } from "../catalogue/search.ts";
import { holdsEveryWord } from "../catalogue/search-text.ts";
import { contentEtag, conversionOf, productsEtag } from "../catalogue/service.ts";
import { streamOf } from "../catalogue/snapshot/read.ts";
import { summarise } from "../catalogue/views.ts";
import type { FeedEvent } from "../events/schema.ts";
import { todaysRates } from "../fx-rates/service.ts";
import type { RequestServices } from "../http/app-env.ts";
import { sandboxBase } from "../sandbox/catalogue.ts";
import { sandboxFacts } from "../sandbox/facts.ts";
import { notInSandbox } from "../sandbox/mix-ups.ts";
import { productState } from "../sandbox/overlay.ts";
import { sandboxCatalogue, sandboxCompetitors, sandboxProductBody, sandboxProductHistory, sandboxProductJson } from "../sandbox/reads.ts";
import { SANDBOX_RETENTION_MS } from "../sandbox/retention.ts";
import { type AccountSandbox, sandboxFeed } from "../sandbox/stub.ts";
import type { KeyData } from "./door.ts";
import { catalogueRows, changeRow } from "./export-rows.ts";
import { CHANGE_TYPES, changesByDay, eventOf, feedStart } from "./export-step.ts";

const encoder = new TextEncoder();

/**
 * A test key's data: its account's sandbox (src/sandbox/), read in the live wire shapes. Its products are the shared
 * generated base with the account's own changes, which its object holds with their history and events; nothing of it
 * is in D1. What a read costs does not grow with the live catalogue or with other accounts' sandboxes.
 */
export function sandboxData(services: Pick<RequestServices, "db" | "catalogue">, sandbox: AccountSandbox): KeyData {
  return {
    environment: "test",
    async productList({ filters, form, gzip, conversion }) {
      const listed = await sandboxCatalogue(sandbox);
      return {
        etag: await productsEtag(listed, filters, form, gzip, conversion),
        body: () => streamOf(sandboxProductBody(listed, { filters, form, conversion }, gzip)),
      };
    },
    productJson: (id, conversion) => sandboxProductJson(sandbox, id, conversion),
    async getProduct(input) {
      const index = input.id === undefined ? sandboxBase().bySku.get(input.sku!) : undefined;
      if (input.id === undefined && index === undefined) throw notInSandbox(`sku ${input.sku}`);
      const id = input.id ?? sandboxBase().products[index!]!.id;
      return JSON.parse(await sandboxProductJson(sandbox, id, await conversionOf(services, input.currency)));
    },
    /** The sandbox's 1,000 products looked through in memory, after one read of the account's changes. */
    async searchProducts(input) {
      const [{ base, overlay }, conversion] = await Promise.all([sandboxCatalogue(sandbox), conversionOf(services, input.currency)]);
      const same = (value: string | null, wanted: string | undefined) =>
        wanted === undefined || value?.toLowerCase() === wanted.toLowerCase();
      const found = base.products
        .map((_, index) => productState(base, overlay, index))
        .filter(
          ({ product, offers }) =>
            (input.sku === undefined || product.sku === input.sku) &&
            (input.query === undefined || holdsEveryWord(input.query, [product.name, product.brand, product.sku])) &&
            same(product.brand, input.brand) &&
            same(product.category, input.category) &&
            (input.competitor === undefined || offers.some((offer) => offer.competitorId === input.competitor)),
        )
        .sort((a, b) => (a.product.id < b.product.id ? -1 : 1));
      return {
        products: found
          .slice(0, input.limit)
          .map(({ product, offers }) => productMatch(product, conversion ? summariseIn(offers, conversion) : summarise(offers))),
        truncated: found.length > input.limit,
      };
    },
    fxRates: () => todaysRates(services.db, services.catalogue.bucket),
    history: (productId, query) => sandboxProductHistory(sandbox, productId, query),
    async competitors() {
      const list = await sandboxCompetitors(sandbox);
      const json = encoder.encode(JSON.stringify({ competitors: list })) as Uint8Array<ArrayBuffer>;
      return { etag: await contentEtag(json), list, json: () => json };
    },
    feed: (query, { newestFirst = false } = {}) => sandboxFeed<FeedEvent>(sandbox, query, { newestFirst }),
    retentionMs: SANDBOX_RETENTION_MS,
    newestEventId: async () => (await sandbox.events({ limit: 1, newestFirst: true }))[0]?.id,
    get facts() {
      return sandboxFacts(sandbox);
    },
    exportCatalogueStart: async () => ({ phase: "catalogue", manifest: null, segment: 0 }),
    exportChangesStart: async (span) => feedStart(span, new Date(Date.now() - SANDBOX_RETENTION_MS).toISOString()),
    /** Its catalogue (1,000 products and the account's changes) in one step, as a test key's GET /products serves it. */
    async exportCatalogue() {
      const catalogue = await sandboxCatalogue(sandbox);
      const decoder = new TextDecoder();
      let text = "";
      for await (const chunk of sandboxProductBody(catalogue, { filters: {}, form: "ndjson" }, false))
        text += decoder.decode(chunk, { stream: true });
      const rows = text
        .split("\n")
        .filter((line) => line.length > 0)
        .flatMap((line) => catalogueRows(JSON.parse(line) as ProductView));
      return {
        days: rows.length > 0 ? new Map([[new Date(catalogue.base.hour).toISOString().slice(0, 10), rows]]) : new Map(),
        next: { phase: "done" },
      };
    },
    /** Its events of [since, until) (kept 7 days), `limits.events` a step, paged by id as its feed is. It has no history phase. */
    async exportChanges(cursor, limits) {
      if (cursor.phase !== "changes") throw new Error("A sandbox export has no history phase.");
      const rows = await sandbox.events({
        ...(cursor.after === null ? { since: cursor.since } : { after: cursor.after, since: cursor.since }),
        until: cursor.until,
        types: CHANGE_TYPES,
        limit: limits.events,
      });
      const base = sandboxBase();
      const fields = (id: string) => {
        const index = base.byId.get(id);
        const product = index === undefined ? undefined : base.products[index];
        return product ? { brand: product.brand, category: product.category } : undefined;
      };
      const changes = rows.map(eventOf).map((event) => changeRow(event, fields(event.data.product_id)));
      return {
        days: changesByDay(changes),
        next: rows.length === limits.events ? { ...cursor, after: rows.at(-1)!.id } : { phase: "done" },
      };
    },
  };
}
