import { COMMIT_SKEW_MS } from "../events/retention.ts";
import { DAY_MS, HOUR_MS } from "../platform/time.ts";
import type { FileMoney } from "./files.ts";

/** What an export's runner (src/exports/runner.ts) and its routes share, apart from the object's class. */

export const MANIFEST = "_manifest.json";

interface ManifestFile {
  path: string;
  date: string;
  /** Parquet: the file's currency in each currency column (`currency`, a catalogue's `summary_currency`) and the scale of the money columns in it. */
  currencies?: FileMoney;
  rows: number;
  bytes: number;
}

/** `_manifest.json`: what the export holds so far; a query engine may read the files without it. */
export interface ExportManifest {
  export_id: string;
  kind: "catalogue" | "changes";
  format: "parquet" | "ndjson";
  environment: "live" | "test";
  since: string | null;
  until: string | null;
  /** The catalogue snapshot (manifest id) a catalogue export, or a changes export's history, read. */
  snapshot: string | null;
  /** Each column and its type; a money column names the column holding its currency. */
  columns: { name: string; type: string; currency?: string }[];
  files: ManifestFile[];
  rows: number;
  bytes: number;
  /** Every file is written (a scheduled export is never complete: it goes on appending). */
  complete: boolean;
}

/** The end of the last closed hour or day at `now`: a partition closes COMMIT_SKEW_MS after its end, when no event of it can still commit. */
export function closedUntil(schedule: "hourly" | "daily", now = Date.now()): string {
  const unit = schedule === "hourly" ? HOUR_MS : DAY_MS;
  return new Date(Math.floor((now - COMMIT_SKEW_MS) / unit) * unit).toISOString();
}
