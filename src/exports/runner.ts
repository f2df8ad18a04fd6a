import { eq } from "drizzle-orm";
import { snapshotAccess } from "../catalogue/snapshot/stub.ts";
import type { KeyData } from "../key-data/door.ts";
import type { ExportCursor } from "../key-data/export-step.ts";
import { keyDataFor } from "../key-data/pick.ts";
import { readConfig } from "../platform/config.ts";
import type { Database } from "../platform/db.ts";
import { logger } from "../platform/log.ts";
import type { ObjectAnswer } from "../platform/metered.ts";
import { MeteredObject } from "../platform/metered-object.ts";
import { nowText } from "../platform/tables.ts";
import { decryptSecret } from "../webhooks/secrets.ts";
import { type FileSink, ownPrefix, r2Sink, type S3Destination, s3Sink } from "./destination.ts";
import { encodeRows, moneyOf, partPath, splitByCurrency } from "./files.ts";
import { type ExportManifest, MANIFEST } from "./manifest.ts";
import { columnsOf, runStep } from "./steps.ts";
import { exports } from "./tables.ts";

/**
 * One object per export (idFromName(export id)) writes it in bounded steps, one step per alarm (docs/exports.md): each
 * step reads the next piece of its source (src/exports/steps.ts), writes that piece's files, then the manifest, then
 * records its cursor and the progress (D1's row, which GET /exports/:id reads). A step that fails (the bucket, R2, D1)
 * records nothing, so its alarm runs the same step again: it writes the same part numbers, so a file is never doubled
 * and none is skipped. After MAX_FAILURES failures in a row the export is failed, saying why.
 */

interface State {
  cursor: ExportCursor;
  manifest: ExportManifest;
  failures: number;
}

const MAX_FAILURES = 8;
const RETRY_MS = 2_000;

const log = logger("exports");

export class ExportRunner extends MeteredObject {
  /** Begins an export, or (a scheduled one) its next span [since, until): the first step runs at once in the alarm. */
  async begin(exportId: string, span?: { since: string; until: string }): Promise<ObjectAnswer> {
    const state = await this.ctx.storage.get<State>("state");
    if (state && state.cursor.phase !== "done") return this.reported({});
    const db = this.meter.database(this.env.DB);
    const [row] = await db.select().from(exports).where(eq(exports.id, exportId));
    if (!row) return this.reported({});
    const data = this.#data(row, db);
    const cursor =
      row.kind === "catalogue"
        ? await data.exportCatalogueStart()
        : await data.exportChangesStart({ since: span?.since ?? row.since!, until: span?.until ?? row.until! });
    const manifest: ExportManifest = state?.manifest ?? {
      export_id: row.id,
      kind: row.kind,
      format: row.format,
      environment: row.environment,
      since: row.since,
      until: row.until,
      snapshot: cursor.phase === "catalogue" ? cursor.manifest : null,
      columns: columnsOf(row.kind).map(({ name, type, currency }) => ({ name, type, ...(currency ? { currency } : {}) })),
      files: [],
      rows: 0,
      bytes: 0,
      complete: false,
    };
    await this.ctx.storage.put({ id: exportId, state: { cursor, manifest: { ...manifest, complete: false }, failures: 0 } });
    await this.ctx.storage.setAlarm(Date.now());
    return this.reported({});
  }

  override alarm(): Promise<void> {
    return this.invocation("export_step", () => this.#step());
  }

  async #step(): Promise<void> {
    const [id, state] = await Promise.all([this.ctx.storage.get<string>("id"), this.ctx.storage.get<State>("state")]);
    if (!id || !state || state.cursor.phase === "done") return;
    const db = this.meter.database(this.env.DB);
    const [row] = await db.select().from(exports).where(eq(exports.id, id));
    if (!row) return; // gone with its account: nothing more to write
    try {
      const sink = await this.#sink(row);
      const { days, next } = await runStep(this.#data(row, db), state.cursor);
      const columns = columnsOf(row.kind);
      const manifest: ExportManifest = { ...state.manifest, files: [...state.manifest.files] };
      for (const [date, rows] of [...days].sort(([a], [b]) => (a < b ? -1 : 1))) {
        // Parquet: a file per day and currency, each money column at its currency's scale (src/exports/files.ts).
        const files = row.format === "parquet" ? splitByCurrency(columns, rows) : [{ currencies: undefined, rows }];
        for (const file of files) {
          const path = partPath(date, manifest.files.length, row.format);
          const body = encodeRows(row.format, columns, file.rows, file.currencies);
          await sink.put(path, body, row.format === "parquet" ? "application/vnd.apache.parquet" : "application/x-ndjson");
          manifest.files.push({ path, date, ...moneyOf(file.currencies), rows: file.rows.length, bytes: body.byteLength });
          manifest.rows += file.rows.length;
          manifest.bytes += body.byteLength;
        }
      }
      const done = next.phase === "done";
      if (done && state.cursor.phase !== "catalogue") manifest.until = state.cursor.until;
      manifest.complete = done && row.schedule === null;
      await this.#putManifest(row, sink, manifest);
      await this.ctx.storage.put("state", { cursor: next, manifest, failures: 0 } satisfies State);
      const status = !done ? "running" : row.schedule ? "scheduled" : "succeeded";
      await db
        .update(exports)
        .set({
          rows: manifest.rows,
          files: manifest.files.length,
          bytes: manifest.bytes,
          status,
          until: manifest.until ?? row.until,
          error: null,
          updatedAt: nowText,
        })
        .where(eq(exports.id, id));
      if (!done) await this.ctx.storage.setAlarm(Date.now());
    } catch (error) {
      const failures = state.failures + 1;
      log.error("export step failed", { export_id: id, failures, error: String(error) });
      await this.ctx.storage.put("state", { ...state, failures } satisfies State);
      if (failures < MAX_FAILURES) {
        await this.ctx.storage.setAlarm(Date.now() + RETRY_MS * 2 ** (failures - 1));
        await db
          .update(exports)
          .set({ error: `retrying: ${String(error)}` })
          .where(eq(exports.id, id));
      } else {
        await db
          .update(exports)
          .set({ status: "failed", error: String(error) })
          .where(eq(exports.id, id));
      }
    }
  }

  /**
   * What the export reads: its account's data in its environment, picked as a request's is (keyDataFor), its bindings
   * counted by the invocation under way. A step reads the primary, never a replica.
   */
  #data(row: typeof exports.$inferSelect, db: Database): KeyData {
    const catalogue = snapshotAccess(
      { CATALOGUE: this.meter.bucket(this.env.CATALOGUE), CATALOGUE_BUILDER: this.env.CATALOGUE_BUILDER },
      this.meter,
    );
    const services = {
      db,
      alerts: this.meter.alertsDatabase(this.env.ALERTS_DB),
      replica: db,
      archive: this.meter.bucket(this.env.ARCHIVE),
      catalogue,
      work: this.meter,
      afterAnswer: (work: Promise<unknown>) => this.ctx.waitUntil(work),
    };
    return keyDataFor(services, this.env, row);
  }

  async #sink(row: typeof exports.$inferSelect): Promise<FileSink> {
    if (!row.destination) return r2Sink(this.meter.bucket(this.env.EXPORTS), ownPrefix(row.accountId, row.id));
    const config = readConfig(this.env);
    if (typeof config === "string") throw new Error(config);
    const secret = await decryptSecret(config.WEBHOOK_SECRET_KEY, { webhookId: row.id, stored: row.secretCiphertext! });
    return s3Sink(row.destination as unknown as S3Destination, secret, row.id);
  }

  /** The manifest in the export's bucket, and a copy in the service's (what GET /exports/:id lists, whatever the destination). */
  async #putManifest(row: typeof exports.$inferSelect, sink: FileSink, manifest: ExportManifest): Promise<void> {
    const body = new TextEncoder().encode(JSON.stringify(manifest));
    await sink.put(MANIFEST, body, "application/json");
    if (row.destination)
      await r2Sink(this.meter.bucket(this.env.EXPORTS), ownPrefix(row.accountId, row.id)).put(MANIFEST, body, "application/json");
  }
}
