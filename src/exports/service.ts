import { and, desc, eq, sql } from "drizzle-orm";
import { ApiError } from "../http/errors.ts";
import { invalidField } from "../http/validation.ts";
import type { Config } from "../platform/config.ts";
import type { Database } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import type { WorkMeter } from "../platform/metered.ts";
import { encryptSecret } from "../webhooks/secrets.ts";
import { webhookUrlProblem } from "../webhooks/url-policy.ts";
import { ownPrefix, type S3Destination, s3Prefix } from "./destination.ts";
import { closedUntil, type ExportManifest, MANIFEST } from "./manifest.ts";
import type { ExportBody, ExportDetailView, ExportView } from "./schema.ts";
import { exports } from "./tables.ts";

/** Exports of one account under way at once (running): more is 409 until one ends. */
export const MAX_RUNNING_EXPORTS = 3;
/** Scheduled exports per account. */
export const MAX_SCHEDULED_EXPORTS = 10;
/** GET /exports lists this many, newest first. */
const LIST_LIMIT = 100;
/** Scheduled exports one cron run begins the next span of (the rest, the next minute). */
const SCHEDULED_PER_RUN = 50;
/** How long a download URL works. */
export const DOWNLOAD_URL_SECONDS = 3600;

type ExportRow = typeof exports.$inferSelect;

export interface ExportServices {
  db: Database;
  config: Config;
  work: WorkMeter;
  runners: Env["EXPORT_RUNNER"];
  bucket: R2Bucket;
  /** The origin download URLs are made for (the request's). */
  origin: string;
}

const notFound = (id: string) => new ApiError(404, `No export ${id} in this account.`);

const runner = ({ runners, work }: Pick<ExportServices, "runners" | "work">, id: string) => {
  const stub = runners.get(runners.idFromName(id));
  return { begin: (span?: { since: string; until: string }) => work.called(stub.begin(id, span)) };
};

function exportView(row: ExportRow): ExportView {
  const destination = row.destination as unknown as S3Destination | null;
  return {
    id: row.id,
    kind: row.kind,
    format: row.format,
    environment: row.environment,
    since: row.since,
    until: row.until,
    schedule: row.schedule,
    status: row.status,
    rows: row.rows,
    files: row.files,
    bytes: row.bytes,
    error: row.error,
    destination,
    prefix: destination ? s3Prefix(destination, row.id) : ownPrefix(row.accountId, row.id),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

const iso = (instant: string) => new Date(instant).toISOString();

export async function createExport(
  services: ExportServices,
  { accountId, body }: { accountId: string; body: ExportBody },
): Promise<ExportView> {
  const { db, config } = services;
  if (body.destination) {
    const problem = webhookUrlProblem(body.destination.endpoint, config.WEBHOOK_ALLOW_INSECURE_URLS);
    if (problem) throw invalidField("body", { field: "destination.endpoint", message: problem });
  }
  const id = newId("exp");
  const now = new Date().toISOString();
  const changes = body.kind === "changes" ? body : undefined;
  const since = changes ? iso(changes.since) : null;
  // A scheduled export's first span ends at the last closed partition; the cron appends the next ones.
  const until = !changes ? null : changes.schedule ? closedUntil(changes.schedule) : iso(changes.until ?? now);
  const { secret_access_key: secret, ...destination } = body.destination ?? { secret_access_key: undefined };
  const row: ExportRow = {
    id,
    accountId,
    environment: body.environment,
    kind: body.kind,
    format: body.format,
    since,
    until: since !== null && until !== null && until < since ? since : until,
    schedule: changes?.schedule ?? null,
    destination: body.destination ? (destination as Record<string, string>) : null,
    secretCiphertext: secret === undefined ? null : await encryptSecret(config.WEBHOOK_SECRET_KEY, { webhookId: id, secret }),
    status: "running",
    rows: 0,
    files: 0,
    bytes: 0,
    error: null,
    createdAt: now,
    updatedAt: now,
  };
  // One statement, so two concurrent creates cannot both slip under a cap.
  const result = await db.run(sql`
    INSERT INTO ${exports} (id, account_id, environment, kind, format, since, until, schedule, destination, secret_ciphertext, status,
      created_at, updated_at)
    SELECT ${row.id}, ${accountId}, ${row.environment}, ${row.kind}, ${row.format}, ${row.since}, ${row.until}, ${row.schedule},
      ${row.destination === null ? null : JSON.stringify(row.destination)}, ${row.secretCiphertext}, 'running', ${now}, ${now}
    WHERE (SELECT count(*) FROM ${exports} WHERE account_id = ${accountId} AND status = 'running') < ${MAX_RUNNING_EXPORTS}
      AND (${row.schedule} IS NULL
        OR (SELECT count(*) FROM ${exports} WHERE account_id = ${accountId} AND schedule IS NOT NULL) < ${MAX_SCHEDULED_EXPORTS})`);
  if (result.meta.changes === 0) {
    throw new ApiError(
      409,
      changes?.schedule
        ? `This account has ${MAX_RUNNING_EXPORTS} exports running or ${MAX_SCHEDULED_EXPORTS} scheduled, the most it may; wait for one to finish.`
        : `This account has ${MAX_RUNNING_EXPORTS} exports running, the most at once; wait for one to finish (GET /exports shows their progress).`,
    );
  }
  await runner(services, id).begin();
  return exportView(row);
}

export async function listExports(db: Database, accountId: string): Promise<{ exports: ExportView[] }> {
  const rows = await db
    .select()
    .from(exports)
    .where(eq(exports.accountId, accountId))
    .orderBy(desc(exports.createdAt), desc(exports.id))
    .limit(LIST_LIMIT);
  return { exports: rows.map(exportView) };
}

/** One export with its files; for the service's own bucket each with a download URL valid DOWNLOAD_URL_SECONDS. */
export async function getExport(services: ExportServices, { accountId, id }: { accountId: string; id: string }): Promise<ExportDetailView> {
  const [row] = await services.db
    .select()
    .from(exports)
    .where(and(eq(exports.id, id), eq(exports.accountId, accountId)));
  if (!row) throw notFound(id);
  const object = await services.bucket.get(ownPrefix(accountId, id) + MANIFEST);
  const manifest = object ? ((await object.json()) as ExportManifest) : null;
  const own = row.destination === null;
  const expires = Math.floor(Date.now() / 1000) + DOWNLOAD_URL_SECONDS;
  const url = async (path: string) => (own ? await downloadUrl(services, { id, path, expires }) : null);
  return {
    ...exportView(row),
    manifest_url: manifest ? await url(MANIFEST) : null,
    file_list: await Promise.all(
      (manifest?.files ?? []).map(async (file) => ({
        path: file.path,
        rows: file.rows,
        bytes: file.bytes,
        download_url: await url(file.path),
      })),
    ),
  };
}

// Signed download URLs: HMAC-SHA256 under a key derived from WEBHOOK_SECRET_KEY, over the export id, the path and the expiry.

const encoder = new TextEncoder();
async function downloadKey(config: Config): Promise<CryptoKey> {
  const secret = await crypto.subtle.importKey("raw", encoder.encode(config.WEBHOOK_SECRET_KEY), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  const derived = await crypto.subtle.sign("HMAC", secret, encoder.encode("export-downloads"));
  return crypto.subtle.importKey("raw", derived, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}
const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
const signed = (id: string, path: string, expires: number) => encoder.encode(`${id}\n${path}\n${expires}`);

async function downloadUrl(
  { config, origin }: Pick<ExportServices, "config" | "origin">,
  file: { id: string; path: string; expires: number },
) {
  const signature = hex(await crypto.subtle.sign("HMAC", await downloadKey(config), signed(file.id, file.path, file.expires)));
  const query = new URLSearchParams({ path: file.path, expires: String(file.expires), signature });
  return `${origin}/exports/${file.id}/download?${query}`;
}

/** A download URL's file, from the service's bucket: 403 when the signature is wrong or the URL expired, 404 when no such file. */
export async function downloadFile(
  { config, db, bucket }: Pick<ExportServices, "config" | "db" | "bucket">,
  { id, path, expires, signature }: { id: string; path: string; expires: number; signature: string },
): Promise<R2ObjectBody> {
  const bytes = new Uint8Array((signature.match(/../g) ?? []).map((pair) => Number.parseInt(pair, 16)));
  const valid = await crypto.subtle.verify("HMAC", await downloadKey(config), bytes, signed(id, path, expires));
  if (!valid) throw new ApiError(403, "This download URL's signature is not valid; take a fresh URL from GET /exports/{id}.");
  if (expires < Date.now() / 1000)
    throw new ApiError(403, "This download URL has expired (they work 1 hour); take a fresh one from GET /exports/{id}.");
  const [row] = await db.select({ accountId: exports.accountId }).from(exports).where(eq(exports.id, id));
  const object = row ? await bucket.get(ownPrefix(row.accountId, id) + path) : null;
  if (!object) throw new ApiError(404, `No file ${path} in export ${id}.`);
  return object;
}

/**
 * The cron's part (src/index.ts scheduled): each scheduled export whose next hour or day has closed begins its next span
 * [until, closed), so each partition is appended once, right after the last.
 */
export async function appendScheduledExports(
  db: Database,
  runners: Env["EXPORT_RUNNER"],
  work: WorkMeter,
  now = Date.now(),
): Promise<number> {
  const [hourly, daily] = [closedUntil("hourly", now), closedUntil("daily", now)];
  const due = await db
    .select({ id: exports.id, schedule: exports.schedule, until: exports.until })
    .from(exports)
    .where(
      and(
        eq(exports.status, "scheduled"),
        sql`((${exports.schedule} = 'hourly' AND ${exports.until} < ${hourly}) OR (${exports.schedule} = 'daily' AND ${exports.until} < ${daily}))`,
      ),
    )
    .limit(SCHEDULED_PER_RUN);
  for (const row of due) {
    await db
      .update(exports)
      .set({ status: "running" })
      .where(and(eq(exports.id, row.id), eq(exports.status, "scheduled")));
    await runner({ runners, work }, row.id).begin({ since: row.until!, until: row.schedule === "hourly" ? hourly : daily });
  }
  return due.length;
}
