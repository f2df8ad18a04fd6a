import type { KeyData } from "../key-data/door.ts";
import { CATALOGUE_COLUMNS, CHANGE_COLUMNS } from "../key-data/export-rows.ts";
import type { ExportCursor, ExportLimits, ExportStep } from "../key-data/export-step.ts";

/**
 * One bounded step of an export: the rows of the next piece of its source, by day, and where the next step starts,
 * read through the export's door (KeyData's export methods: src/key-data/live-export.ts for live data, the account's
 * sandbox in src/key-data/sandbox.ts), which its runner picked from the export's environment.
 * A step's work does not grow with the catalogue or the span: at most `segments` snapshot segments (about 5,000
 * products, a build step's size), or `events` events read through at most `archiveReads` archive objects and one D1
 * batch, plus one D1 statement for the products' brand and category. (Tests lower them to make many steps of little data.)
 */
export const STEP_LIMITS: ExportLimits = {
  segments: 5,
  events: 5000,
  archiveReads: 5,
  historyProducts: 100,
};

export const columnsOf = (kind: "catalogue" | "changes") => (kind === "catalogue" ? CATALOGUE_COLUMNS : CHANGE_COLUMNS);

export async function runStep(data: KeyData, cursor: ExportCursor): Promise<ExportStep> {
  if (cursor.phase === "done") return { days: new Map(), next: cursor };
  return cursor.phase === "catalogue" ? data.exportCatalogue(cursor, STEP_LIMITS) : data.exportChanges(cursor, STEP_LIMITS);
}
