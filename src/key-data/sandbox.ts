import { summariseIn } from "../catalogue/converted.ts";
import { unknownProduct } from "../catalogue/history.ts";
import { productMatch } from "../catalogue/search.ts";
import { contentEtag, conversionOf, productsEtag } from "../catalogue/service.ts";
import { streamOf } from "../catalogue/snapshot/read.ts";
import { summarise } from "../catalogue/views.ts";
import type { FeedEvent } from "../events/schema.ts";
import type { RequestServices } from "../http/app-env.ts";
import { sandboxBase } from "../sandbox/catalogue.ts";
import { sandboxFacts } from "../sandbox/facts.ts";
import { productState } from "../sandbox/overlay.ts";
import { sandboxCatalogue, sandboxCompetitors, sandboxProductBody, sandboxProductHistory, sandboxProductJson } from "../sandbox/reads.ts";
import { SANDBOX_RETENTION_MS } from "../sandbox/retention.ts";
import { type AccountSandbox, sandboxFeed } from "../sandbox/stub.ts";
import type { KeyData } from "./door.ts";

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
      if (input.id === undefined && index === undefined) throw unknownProduct(`sku ${input.sku}`);
      const id = input.id ?? sandboxBase().products[index!]!.id;
      return JSON.parse(await sandboxProductJson(sandbox, id, await conversionOf(services, input.currency)));
    },
    /** The sandbox's 1,000 products looked through in memory, after one read of the account's changes. */
    async searchProducts(input) {
      const [{ base, overlay }, conversion] = await Promise.all([sandboxCatalogue(sandbox), conversionOf(services, input.currency)]);
      const text = input.query?.toLowerCase();
      const same = (value: string | null, wanted: string | undefined) =>
        wanted === undefined || value?.toLowerCase() === wanted.toLowerCase();
      const found = base.products
        .map((_, index) => productState(base, overlay, index))
        .filter(
          ({ product, offers }) =>
            (input.sku === undefined || product.sku === input.sku) &&
            (text === undefined || [product.name, product.brand ?? "", product.sku].some((field) => field.toLowerCase().includes(text))) &&
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
  };
}
