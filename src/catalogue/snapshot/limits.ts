import type { Database } from "../../platform/db.ts";
import type { BuildWork } from "./build-report.ts";

/**
 * What a build step works within (its sizes and budgets) and with (BuildDeps), apart from the steps
 * themselves (build.ts) so the modules a step uses can take them without importing the steps.
 */

/**
 * The sizes a build works with. Production uses BUILD_LIMITS; the tests pass smaller ones (through
 * BuildDeps) to get builds of many steps out of a few hundred products.
 */
export interface BuildLimits {
  /** Products per part in a full build; a re-encoded part over twice this is split into parts of this size. */
  partTarget: number;
  /** Products per segment in a full build, and per page read from D1; a rewritten segment over twice this is split. */
  segmentTarget: number;
  /** A step starts no segment once it encoded this many products (locally about 0.1 ms of CPU each: D1 rows, JSON, deflate). */
  stepProducts: number;
  /** Segments a step writes at most. */
  stepSegments: number;
}
/**
 * Parts of 12 products: 1,000 changes scattered over 100,000 products touch about 940 parts (P·(1−e^(−k/P))),
 * 11 % of the products re-encoded (parts of 25: 22 %), for stored bodies about 10 % larger (docs/catalogue.md).
 */
export const BUILD_LIMITS: BuildLimits = { partTarget: 12, segmentTarget: 1000, stepProducts: 5000, stepSegments: 16 };
export const SEGMENT_TARGET = BUILD_LIMITS.segmentTarget;
export const SEGMENT_MAX = 2 * SEGMENT_TARGET;
/**
 * D1 statements a step makes at most (D1 allows 1,000 an invocation): an incremental step takes a segment
 * only while its changed parts' statements (two per RANGES_PER_STATEMENT parts) fit after its candidates'
 * changed ids (one each) and the competitors'; a scan step makes at most SCAN_PAGES and a full-build step
 * two a segment.
 */
export const STEP_D1_STATEMENTS = 150;
/**
 * R2 reads an incremental step makes at most (each is a subrequest: Workers Paid allows 10,000 a request,
 * 1,000 on older plans, so this stays well under both): a segment costs its part index and, when
 * compacted, two reads per kept run it copies.
 */
export const STEP_R2_READS = 600;

/** What a step works with: the object's storage for progress, and D1 and R2 (counting into `work`). Tests pass failing ones. */
export interface BuildDeps {
  db: Database;
  bucket: R2Bucket;
  storage: DurableObjectStorage;
  work: BuildWork;
  limits: BuildLimits;
}
