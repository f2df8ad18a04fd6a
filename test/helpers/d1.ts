import { env } from "cloudflare:workers";
import { vi } from "vitest";

/**
 * Test seams on the D1 binding the worker uses (env.DB is the same object the worker's fetch handler
 * gets, so spying on its `batch` reaches every batch an ingestion sends). Undo with vi.restoreAllMocks().
 */

const sqlOf = (statements: readonly D1PreparedStatement[]) =>
  statements.map((s) => (s as D1PreparedStatement & { statement: string }).statement).join("\n");

/** An ingestion's read batch (products by sku) and its write batch (it starts with the guard's failing INSERT). */
const isIngestionRead = (statements: readonly D1PreparedStatement[]) => /"products"\."sku" IN/.test(sqlOf(statements));
export const isIngestionWrite = (statements: readonly D1PreparedStatement[]) => /SELECT 0, 0, ''/.test(sqlOf(statements));

/**
 * Injected D1 latency, made deterministic: the first `count` ingestion writes wait until `count` reads
 * have completed, so every one of `count` concurrent ingestions reads before any of them writes (what tens
 * of milliseconds between read and write on real D1 make likely; local D1 answers in well under one).
 * Returns the number of read and write batches seen so far.
 */
export function holdIngestionWrites(count: number): () => { reads: number; writes: number } {
  const batch = env.DB.batch.bind(env.DB);
  const seen = { reads: 0, writes: 0 };
  vi.spyOn(env.DB, "batch").mockImplementation(async (statements) => {
    if (isIngestionRead(statements)) {
      const result = await batch(statements);
      seen.reads++;
      return result;
    }
    // Each held write waits on its own timer: workerd forbids settling a promise of one request from another.
    if (isIngestionWrite(statements) && ++seen.writes <= count) while (seen.reads < count) await scheduler.wait(1);
    return batch(statements);
  });
  return () => ({ ...seen });
}

/** D1's per-statement limits in production, which local D1 does not enforce. */
const D1_MAX_BOUND_PARAMETERS = 100;
export const D1_MAX_VALUE_BYTES = 2_000_000;

const utf8 = new TextEncoder();

/**
 * Makes every batch refuse, as production D1 would, a statement with more than 100 bound parameters or
 * a bound string or blob over 2,000,000 bytes. Returns the largest bound value seen (UTF-8 bytes) and
 * the most parameters a statement had, so a test can say how close it came.
 */
export function enforceD1Limits(): () => { largestValueBytes: number; mostParameters: number } {
  const batch = env.DB.batch.bind(env.DB);
  const seen = { largestValueBytes: 0, mostParameters: 0 };
  vi.spyOn(env.DB, "batch").mockImplementation(async (statements) => {
    for (const statement of statements) {
      const params = (statement as D1PreparedStatement & { params: unknown[] }).params;
      seen.mostParameters = Math.max(seen.mostParameters, params.length);
      if (params.length > D1_MAX_BOUND_PARAMETERS) throw new Error(`D1_ERROR: too many SQL variables (${params.length})`);
      for (const value of params) {
        const bytes = typeof value === "string" ? utf8.encode(value).byteLength : Array.isArray(value) ? value.length : 0;
        seen.largestValueBytes = Math.max(seen.largestValueBytes, bytes);
        if (bytes > D1_MAX_VALUE_BYTES) throw new Error(`D1_ERROR: string or blob too big (${bytes} bytes)`);
      }
    }
    return batch(statements);
  });
  return () => ({ ...seen });
}
