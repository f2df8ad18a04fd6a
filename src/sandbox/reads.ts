import { type Conversion, convertProductJson } from "../catalogue/converted.ts";
import { filterSet, rowMatcher } from "../catalogue/filtered.ts";
import { HISTORY_LIMIT, type HistoryPage, historyEntryView } from "../catalogue/history.ts";
import { type ArchivedHistoryRow, mergeHistory } from "../catalogue/history-archive.ts";
import type { CompetitorView, HistoryQuery, ProductFilters } from "../catalogue/schema.ts";
import { gzipMember, isFiltered } from "../catalogue/service.ts";
import { concatenated, type Deflated, deflatePart, FINAL_BLOCK, GZIP_HEADER, gzipTrailer } from "../catalogue/snapshot/gzip-member.ts";
import { productView } from "../catalogue/views.ts";
import { sha256Hex } from "../platform/hash.ts";
import { baseHistory, type SandboxBase, sandboxBase } from "./catalogue.ts";
import { notInSandbox } from "./mix-ups.ts";
import { type OverlayRow, type ProductState, productState } from "./overlay.ts";
import type { AccountSandbox } from "./stub.ts";

/**
 * A test key's catalogue reads: its account's sandbox, through the catalogue's own view builders (src/catalogue/views.ts),
 * so its products have the live wire shape. A list reads the account's overlay in one call to its object (its rows: the
 * products the account changed) and nothing else; the base is the isolate's.
 */

const encoder = new TextEncoder();
const names = (base: SandboxBase) => new Map(base.competitors.map((c) => [c.id, { name: c.name }]));

/** The base products' JSON, serialised once per base (an hour, per isolate). */
const baseJson = new WeakMap<SandboxBase, string[]>();
function baseLines(base: SandboxBase): string[] {
  let lines = baseJson.get(base);
  if (!lines) {
    const competitorNames = names(base);
    lines = base.products.map((product) => JSON.stringify(productView(product, base.offers.get(product.id)!, competitorNames)));
    baseJson.set(base, lines);
  }
  return lines;
}

export interface SandboxCatalogue {
  base: SandboxBase;
  overlay: Map<string, OverlayRow>;
  /**
   * Names what the account's sandbox holds now: the base's hour, and the account with the versions of its changed
   * products (two accounts' sandboxes can hold the same products at the same versions, at different prices).
   */
  id: string;
}

/** The account's sandbox as a list reads it: the base and every product the account changed (one call). */
export async function sandboxCatalogue(sandbox: AccountSandbox): Promise<SandboxCatalogue> {
  const base = sandboxBase();
  const overlay = await sandbox.overlay();
  const versions = [...overlay].map(([id, row]) => `${id}:${row.version}`).sort();
  const named = `${sandbox.accountId}\n${versions.join(",")}`;
  return { base, overlay, id: `sbx-${base.hour.toString(36)}-${await sha256Hex(named, 8)}` };
}

/** The products a part of the unfiltered list holds: its pieces are put together, not compressed, per request. */
const PART_PRODUCTS = 100;

/** The base's products in id order (the list's order), and each form's parts of the unfiltered list, made once per base. */
interface ListParts {
  order: number[];
  texts: Map<"json" | "ndjson", string[]>;
  deflated: Map<"json" | "ndjson", Deflated[]>;
}
const baseParts = new WeakMap<SandboxBase, ListParts>();
function partsOf(base: SandboxBase): ListParts {
  let parts = baseParts.get(base);
  if (!parts) {
    const order = base.products.map((_, index) => index).sort((a, b) => (base.products[a]!.id < base.products[b]!.id ? -1 : 1));
    parts = { order, texts: new Map(), deflated: new Map() };
    baseParts.set(base, parts);
  }
  return parts;
}

/** Part `k` of the unfiltered list as text: its products' lines, joined as the form has them. */
function partText(form: "json" | "ndjson", k: number, lines: readonly string[]): string {
  return form === "json" ? (k > 0 ? "," : "") + lines.join(",") : lines.map((line) => `${line}\n`).join("");
}

/**
 * GET /products with a test key: the sandbox's products that pass the filters, as `{"products":[…]}` or NDJSON, in id
 * order. The unfiltered list is put together from parts of PART_PRODUCTS products compressed once per base (the gzip
 * member's pieces, as the catalogue's snapshot stores them: src/catalogue/snapshot/gzip-member.ts), so a request
 * compresses only the parts holding products its account changed; a filtered one compresses what it returns.
 */
export async function* sandboxProductBody(
  { base, overlay }: SandboxCatalogue,
  { filters, form, conversion }: { filters: ProductFilters; form: "json" | "ndjson"; conversion?: Conversion | undefined },
  gzip: boolean,
): AsyncGenerator<Uint8Array> {
  const lines = baseLines(base);
  const competitorNames = names(base);
  const viewOf = (index: number) => {
    if (!overlay.has(base.products[index]!.id)) return lines[index]!;
    const { product, offers } = productState(base, overlay, index);
    return JSON.stringify(productView(product, offers, competitorNames));
  };
  // A conversion makes the list a filtered one (isFiltered), so the stored parts below never hold a converted line.
  const lineOf = (index: number) => (conversion ? convertProductJson(viewOf(index), conversion) : viewOf(index));
  const { order, texts, deflated } = partsOf(base);
  if (isFiltered(filters)) {
    const matches = rowMatcher(filterSet(filters));
    const picked = order.filter((index) => {
      const state = productState(base, overlay, index);
      return matches(state.product, state.offers);
    });
    const body = [form === "json" ? `{"products":[${picked.map(lineOf).join(",")}]}` : picked.map((i) => `${lineOf(i)}\n`).join("")];
    yield* gzip ? gzipMember(toBytes(body)) : toBytes(body);
    return;
  }
  const chunks = Array.from({ length: Math.ceil(order.length / PART_PRODUCTS) }, (_, k) =>
    order.slice(k * PART_PRODUCTS, (k + 1) * PART_PRODUCTS),
  );
  const changed = (chunk: readonly number[]) => chunk.some((index) => overlay.has(base.products[index]!.id));
  if (!texts.has(form))
    texts.set(
      form,
      chunks.map((chunk, k) =>
        partText(
          form,
          k,
          chunk.map((index) => lines[index]!),
        ),
      ),
    );
  const textOf = (chunk: readonly number[], k: number) => (changed(chunk) ? partText(form, k, chunk.map(lineOf)) : texts.get(form)![k]!);
  const [head, tail] = form === "json" ? ['{"products":[', "]}"] : ["", ""];
  if (!gzip) {
    yield* toBytes([head, ...chunks.map(textOf), tail]);
    return;
  }
  if (!deflated.has(form)) deflated.set(form, texts.get(form)!.map(deflatePart));
  const parts = [
    deflatePart(head),
    ...chunks.map((chunk, k) => (changed(chunk) ? deflatePart(textOf(chunk, k)) : deflated.get(form)![k]!)),
    deflatePart(tail),
  ];
  yield GZIP_HEADER.slice();
  for (const part of parts) yield part.bytes;
  yield FINAL_BLOCK.slice();
  yield gzipTrailer(concatenated(parts));
}

async function* toBytes(texts: readonly string[]): AsyncGenerator<Uint8Array> {
  for (const text of texts) if (text.length > 0) yield encoder.encode(text);
}

/** The sandbox product, or 404 naming the environment; one statement (the product's own row, if changed). */
async function sandboxProduct(sandbox: AccountSandbox, id: string): Promise<{ base: SandboxBase; state: ProductState }> {
  const base = sandboxBase();
  const index = base.byId.get(id);
  if (index === undefined) throw notInSandbox(id);
  return { base, state: productState(base, await sandbox.overlay([id]), index) };
}

/** GET /products/{id} with a test key (`?currency=`: converted as a live product is). */
export async function sandboxProductJson(sandbox: AccountSandbox, id: string, conversion?: Conversion): Promise<string> {
  const { base, state } = await sandboxProduct(sandbox, id);
  const json = JSON.stringify(productView(state.product, state.offers, names(base)));
  return conversion ? convertProductJson(json, conversion) : json;
}

/** GET /products/{id}/history with a test key: the generated history and the account's own changes, oldest first. */
export async function sandboxProductHistory(sandbox: AccountSandbox, id: string, query: HistoryQuery): Promise<HistoryPage> {
  const base = sandboxBase();
  if (!base.byId.has(id)) throw notInSandbox(id);
  const wanted = (row: ArchivedHistoryRow) =>
    (query.competitor === undefined || row.competitorId === query.competitor) &&
    (query.from === undefined || row.observedAt >= query.from) &&
    (query.to === undefined || row.observedAt < query.to);
  const own = await sandbox.history([id], { ...query, limit: HISTORY_LIMIT + 1 });
  const rows = mergeHistory(baseHistory(base, id).filter(wanted), own);
  return { product_id: id, history: rows.slice(0, HISTORY_LIMIT).map(historyEntryView), truncated: rows.length > HISTORY_LIMIT };
}

/** GET /competitors with a test key: the sandbox's shops and their offer counts, the account's changes included. */
export async function sandboxCompetitors(sandbox: AccountSandbox): Promise<CompetitorView[]> {
  const { base, overlay } = await sandboxCatalogue(sandbox);
  const counts = new Map<string, number>();
  base.products.forEach((_, index) => {
    for (const offer of productState(base, overlay, index).offers)
      counts.set(offer.competitorId, (counts.get(offer.competitorId) ?? 0) + 1);
  });
  return base.competitors.map((c) => ({ ...c, offer_count: counts.get(c.id) ?? 0 }));
}
