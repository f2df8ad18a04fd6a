/**
 * What a catalogue build did (src/catalogue/snapshot/build.ts): logged by the builder with each build, read
 * back by the bench (bench/modes/catalogue.ts), which is why this file needs no Workers types.
 */

/** What a build does, in total and in its largest step. */
export interface BuildWork {
  /** D1 round trips (a batch is one) and statements. */
  d1: number;
  d1Statements: number;
  /** Rows D1 read for the build (its billing unit; a statement scanning the catalogue shows here). */
  d1RowsRead: number;
  r2Reads: number;
  r2Writes: number;
  /** Bytes written to R2 (new parts, copied parts, value lists; not the manifest). */
  r2BytesWritten: number;
  /** Of those, the per-value lists' (src/catalogue/snapshot/value-lists.ts): new pieces and compacted lists. */
  listBytesWritten: number;
  /** Part indexes written to the builder's storage (one per segment written). */
  partIndexesWritten: number;
  segmentsWritten: number;
  partsEncoded: number;
  productsEncoded: number;
}
export const noBuildWork = (): BuildWork => ({
  d1: 0,
  d1Statements: 0,
  d1RowsRead: 0,
  r2Reads: 0,
  r2Writes: 0,
  r2BytesWritten: 0,
  listBytesWritten: 0,
  partIndexesWritten: 0,
  segmentsWritten: 0,
  partsEncoded: 0,
  productsEncoded: 0,
});

export interface BuildReport {
  /** False when the snapshot already held every change. */
  built: boolean;
  manifest: string | null;
  version: number;
  full: boolean;
  segmentsWritten: number;
  products: number;
  /** From the first step's start to the pointer's move. */
  ms: number;
  steps: number;
  work: BuildWork;
  /** The step with the most D1 statements, and the longest step's wall time. */
  largestStep: BuildWork & { ms: number };
}
