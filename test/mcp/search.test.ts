import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { searchProducts } from "../../src/catalogue/search.ts";
import { snapshotAccess } from "../../src/catalogue/snapshot/stub.ts";
import { database } from "../../src/platform/db.ts";
import { WorkMeter } from "../../src/platform/metered.ts";
import { createCompetitor, createProduct } from "../helpers/catalogue-factory.ts";
import { ingest } from "../helpers/webhooks.ts";

/**
 * search_products' text: through the trigram index (the tool refuses fewer than 3 characters, test/mcp/mcp.test.ts),
 * each of its words a substring of name, brand or SKU, case-insensitive, and the index follows every write to products
 * (ingestion's upserts included).
 */

// Digits only: the tests' short words ("wh", "tv") must not turn up inside it by chance (a base-36 run id held "wh" once).
const run = String(Date.now());
const stores = { db: database(env.DB), catalogue: snapshotAccess(env, new WorkMeter()) };
const search = async (query: string, limit = 100) =>
  (await searchProducts(stores, { query, limit })).products.map((product) => product.sku);

describe("search_products' text", () => {
  it("finds a substring of name, brand or SKU in any case, unicode included, and treats the text as text", async () => {
    const skus = { kettle: `KT-${run}-1`, toaster: `TS-${run}-2`, plain: `ZQ${run}-3` };
    await createProduct({ sku: skus.kettle, name: `Kettle Deluxe ${run} ☕`, brand: "Acme" });
    await createProduct({ sku: skus.toaster, name: `Grüße Toaster ${run}`, brand: `Ünïcorn ${run}` });
    await createProduct({ sku: skus.plain, name: `Plain ${run}` });

    expect(await search(`deluxe ${run}`)).toEqual([skus.kettle]);
    expect(await search(`KETTLE DELUXE ${run}`)).toEqual([skus.kettle]);
    expect(await search(`grüße toaster ${run}`)).toEqual([skus.toaster]);
    expect(await search(`ünïcorn ${run}`)).toEqual([skus.toaster]); // the brand
    expect(await search(`${run}-3`)).toEqual([skus.plain]); // the SKU, lower case
    expect(await search(run)).toEqual([skus.kettle, skus.toaster, skus.plain]); // in the index's order: as they were written
    // Quotes and FTS operators are text: no error, and only a product holding them would match.
    expect(await search(`"${run}" OR NEAR(a b) *`)).toEqual([]);
  });

  it("finds every word of the text, each in name, brand or SKU, in any order and case; short words are checked too", async () => {
    const skus = { headphones: `HP-${run}-1`, speaker: `SP-${run}-2`, tv: `TV-${run}-3` };
    await createProduct({ sku: skus.headphones, name: `WH-1000XM5 Wireless Headphones ${run}`, brand: `Sony${run}` });
    await createProduct({ sku: skus.speaker, name: `Wireless Speaker ${run}`, brand: `Sony${run}` });
    await createProduct({ sku: skus.tv, name: `Bravia 55 tv 4k ${run}`, brand: `Sony${run}` });

    expect(await search(`sony${run} headphones`)).toEqual([skus.headphones]); // brand and name
    expect(await search(`HEADPHONES   sony${run}`)).toEqual([skus.headphones]); // any order, any case, any spacing
    expect(await search(`wireless sony${run}`)).toEqual([skus.headphones, skus.speaker]);
    expect(await search(`wireless ${run}-2`)).toEqual([skus.speaker]); // a word of the SKU
    expect(await search(`sony${run} kettle`)).toEqual([]); // every word must be found
    expect(await search(`sony${run} tv`)).toEqual([skus.tv]); // a 2-character word, checked on what the others found
    expect(await search(`sony${run} 4k wh`)).toEqual([]);
    // A word that spans two fields is not a word of either.
    expect(await search(`speaker${run}`)).toEqual([]);
  });

  it("follows every write: a product ingested, its brand filled by a later observation, a name corrected, a row deleted", async () => {
    const sku = `RN-${run}`;
    await ingest([{ sku, name: `Before ${run} Name`, brand: null }]);
    expect(await search(`before ${run}`)).toEqual([sku]);
    await ingest([{ sku, name: `Before ${run} Name`, brand: `Filled ${run}`, price: "11.00" }]);
    expect(await search(`filled ${run}`)).toEqual([sku]);
    await env.DB.prepare("UPDATE products SET name = ? WHERE sku = ?").bind(`After ${run} Name`, sku).run();
    expect(await search(`before ${run}`)).toEqual([]);
    expect(await search(`after ${run}`)).toEqual([sku]);
    await env.DB.prepare("UPDATE products SET name = name, brand = brand WHERE sku = ?").bind(sku).run(); // nothing changed
    expect(await search(`after ${run}`)).toEqual([sku]);
    await env.DB.prepare("DELETE FROM offers WHERE product_id = (SELECT id FROM products WHERE sku = ?)").bind(sku).run();
    await env.DB.prepare("DELETE FROM price_history WHERE product_id = (SELECT id FROM products WHERE sku = ?)").bind(sku).run();
    await env.DB.prepare("DELETE FROM products WHERE sku = ?").bind(sku).run();
    expect(await search(`after ${run}`)).toEqual([]);
    // The index agrees with the table (FTS5's own check).
    await env.DB.prepare("INSERT INTO products_search (products_search, rank) VALUES ('integrity-check', 1)").run();
  });

  it("checks the other filters on at most `limit` products of one filter, complete when one has fewer, else says more may match", async () => {
    const shop = await createCompetitor({ id: `cmp_trunc_${run}` });
    const name = `Trunc ${run}`;
    const skus = [`TR-${run}-1`, `TR-${run}-2`, `TR-${run}-3`];
    await createProduct({ sku: skus[0], name, brand: "Alpha" });
    await createProduct({ sku: skus[1], name, brand: "Beta", offers: [{ competitor: shop.id, price: "5.00" }] });
    await createProduct({ sku: skus[2], name, brand: "Alpha" });
    const filtered = async (filters: { brand?: string; competitor?: string; sku?: string }, limit: number) => {
      const { products, truncated } = await searchProducts(stores, { query: name, ...filters, limit });
      return { skus: products.map((product) => product.sku), truncated };
    };
    // Every filter has `limit` products or more: the text's first (in the index's order) are checked against the brand.
    expect(await filtered({ brand: "beta" }, 1)).toEqual({ skus: [], truncated: true });
    // A filter with fewer than `limit` products gave them all: the answer is complete.
    expect(await filtered({ brand: "beta" }, 4)).toEqual({ skus: [skus[1]], truncated: false });
    expect(await filtered({ competitor: shop.id }, 2)).toEqual({ skus: [skus[1]], truncated: false });
    expect(await filtered({ brand: "alpha" }, 3)).toEqual({ skus: [skus[0], skus[2]], truncated: false });
    // A SKU drives, the text is checked on its one product.
    expect(await filtered({ sku: skus[2] }, 1)).toEqual({ skus: [skus[2]], truncated: false });
    expect(await filtered({ sku: `ZQ${run}-3` }, 1)).toEqual({ skus: [], truncated: false });
  });
});
