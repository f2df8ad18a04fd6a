/**
 * `npm run bench -- --search`: search_products' text at two catalogue sizes, through the trigram index
 * (migrations/0013_products_search.sql: the first 20 matches in the index's order, the tool's own read) and by the
 * scan it replaced (every product read, the first 20 by name), on the same seeded local D1, timed by D1 itself
 * (`meta.duration` of `wrangler d1 execute --local --json`, so wrangler's start-up is not in it), the median of a few runs.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type SQL, sql } from "drizzle-orm";
import { SQLiteSyncDialect } from "drizzle-orm/sqlite-core";
import { matchedProduct, textMatches } from "../../src/catalogue/search-text.ts";
import { products } from "../../src/platform/tables.ts";
import type { Bench } from "../harness/bench.ts";
import { wrangler } from "../harness/processes.ts";
import type { Run } from "../harness/settings.ts";
import { seedState } from "../harness/setup.ts";
import { nowUtc } from "../report/run-info.ts";

const dialect = new SQLiteSyncDialect();

const PAGE = 20;

/** One SQL text (wrangler's --command binds nothing). */
function inlined(query: SQL): string {
  const { sql: text, params } = dialect.sqlToQuery(query);
  let i = 0;
  return text.replace(/\?/g, () => {
    const value = params[i++];
    return typeof value === "number" ? String(value) : `'${String(value).replaceAll("'", "''")}'`;
  });
}

function indexedRead(text: string) {
  const matches = textMatches(text, PAGE);
  return inlined(sql`SELECT id, sku, name, brand, category FROM ${matches} JOIN ${products} ON ${matchedProduct(matches)}`);
}

/** The read before the index: every product's three fields, the first by name. */
function scannedRead(text: string) {
  const needle = text.toLowerCase();
  return inlined(
    sql`SELECT id, sku, name, brand, category FROM ${products} WHERE instr(lower(name), ${needle}) > 0
      OR instr(lower(coalesce(brand, '')), ${needle}) > 0 OR instr(lower(sku), ${needle}) > 0 ORDER BY name, id LIMIT ${PAGE}`,
  );
}

/** What D1 took to run `command` (ms), and the rows it gave. */
async function timed(dir: string, command: string): Promise<{ ms: number; rows: number }> {
  const out = await wrangler(["d1", "execute", "DB", "--local", "--persist-to", dir, "--json", "--command", command]);
  const [result] = JSON.parse(out) as { results: unknown[]; meta: { duration: number } }[];
  return { ms: result!.meta.duration, rows: result!.results.length };
}

/** The texts searched: what each finds in the seeded catalogue (scripts/seed.ts). */
const QUERIES = [
  { label: "one product (a SKU's number)", text: "-001217" },
  { label: "a brand (about 1 in 10)", text: "Sony" },
  { label: "nothing", text: "qqqq" },
];

interface SearchResult {
  products: number;
  queries: { label: string; text: string; rows: number; indexMs: number; scanMs: number }[];
}

async function measureSearch(stateDir: string, sizes: readonly number[], runs: number, step: (m: string) => void) {
  const results: SearchResult[] = [];
  for (const size of sizes) {
    const dir = join(stateDir, `search-${size}`);
    mkdirSync(dir, { recursive: true });
    step(`search: seeding ${size.toLocaleString("en")} products (the index's triggers fill it as they are written)`);
    await seedState(dir, size, "SELECT 1;\n", 30 * 60_000);
    const result: SearchResult = { products: size, queries: [] };
    for (const { label, text } of QUERIES) {
      const median = async (command: string) => {
        const samples = [];
        for (let run = 0; run < runs; run++) samples.push(await timed(dir, command));
        return { ms: samples.map((s) => s.ms).sort((a, b) => a - b)[Math.floor(runs / 2)]!, rows: samples[0]!.rows };
      };
      const [index, scan] = [await median(indexedRead(text)), await median(scannedRead(text))];
      if (index.rows !== scan.rows) throw new Error(`"${text}": the index found ${index.rows} rows, the scan ${scan.rows}`);
      result.queries.push({ label, text, rows: index.rows, indexMs: index.ms, scanMs: scan.ms });
      step(`${size.toLocaleString("en")} products, "${text}": index ${index.ms.toFixed(2)} ms, scan ${scan.ms.toFixed(2)} ms`);
    }
    results.push(result);
  }
  return results;
}

function searchReport(results: readonly SearchResult[], runs: number): string[] {
  const lines = [
    `### search_products' text (\`npm run bench -- --search\`), ${nowUtc()}`,
    "",
    `D1's own time for the read (the index: the first 20 matches in its order; the scan: the first 20 by name), median of ${runs}, in D1's whole milliseconds (0 ms: under one); the same seeded database for both.`,
    "",
    "| products | text | rows (of 20 at most) | trigram index | scan (before) | scan ÷ index |",
    "|---:|---|---:|---:|---:|---:|",
  ];
  for (const { products: size, queries } of results) {
    for (const q of queries) {
      lines.push(
        `| ${size.toLocaleString("en")} | ${q.label}: \`${q.text}\` | ${q.rows} | ${q.indexMs.toFixed(2)} ms | ${q.scanMs.toFixed(2)} ms | ${q.indexMs >= 1 ? `${(q.scanMs / q.indexMs).toFixed(0)} ×` : "—"} |`,
      );
    }
  }
  return lines;
}

/** `npm run bench -- --search [--quick] [--products-max]`: index against scan at the catalogue sizes; writes bench/results/search.md. */
export async function searchMode(bench: Bench, { args, size }: Run): Promise<string> {
  const runs = size === "quick" ? 3 : 5;
  const sizes = size === "quick" ? [2_000] : [10_000, 100_000, ...(args["products-max"] ? [1_000_000] : [])];
  const text = searchReport(await measureSearch(bench.state, sizes, runs, bench.step), runs).join("\n");
  bench.writeResults({ "search.md": `${text}\n` });
  return text;
}
