import { createRoute } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "../http/app-env.ts";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { validationHook } from "../http/validation.ts";
import { operation } from "../operation/operation.ts";
import { downloadQuery, Export, ExportDetail, ExportList, exportBody, exportIdParam } from "./schema.ts";
import {
  createExport,
  DOWNLOAD_URL_SECONDS,
  downloadFile,
  type ExportServices,
  getExport,
  listExports,
  MAX_RUNNING_EXPORTS,
  MAX_SCHEDULED_EXPORTS,
} from "./service.ts";

const common = { tags: ["Exports"], credential: "account" as const };

const createExportRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/",
    operationId: "createExport",
    summary: "Export the catalogue or its changes as files",
    description:
      "Writes the published catalogue snapshot (kind catalogue: one row per offer, with its product's fields, as GET /products serves " +
      "them) or the price.changed and stock.changed events of [since, until) (kind changes: one row per event, with the product's brand " +
      "and category) as Parquet (typed columns: money DECIMAL(20,4), timestamps TIMESTAMP) or NDJSON files, Hive-partitioned by day " +
      "(date=YYYY-MM-DD/part-NNNNN.parquet) with a _manifest.json, in bounded steps. Into the service's bucket (GET /exports/{id} gives " +
      `download URLs valid ${DOWNLOAD_URL_SECONDS / 3600} hour) or the customer's S3-compatible bucket (destination; its endpoint follows ` +
      "the webhooks' URL policy, its secret is stored encrypted and never shown again). schedule (changes only) appends each closed hour's " +
      `or day's changes. At most ${MAX_RUNNING_EXPORTS} exports of an account run at once, and ${MAX_SCHEDULED_EXPORTS} are scheduled (then 409).`,
    request: { query: noQuery, body: jsonBody(exportBody, "What to export, in which format, and where") },
    errors: { conflict: true },
    responses: { 202: jsonResponse("The export, begun: GET /exports/{id} shows its progress", Export) },
  }),
);

const listExportsRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/",
    operationId: "listExports",
    summary: "List the account's exports",
    request: { query: noQuery },
    responses: { 200: jsonResponse("The latest 100 exports, newest first", ExportList) },
  }),
);

const getExportRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}",
    operationId: "getExport",
    summary: "One export: its progress and files",
    request: { params: exportIdParam, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The export, with its files so far (and their download URLs for the service's bucket)", ExportDetail) },
  }),
);

const exportServices = (c: Context<AppEnv>): ExportServices => ({
  db: c.var.services.db,
  config: c.var.services.config,
  work: c.var.services.work,
  runners: c.env.EXPORT_RUNNER,
  bucket: c.var.services.work.bucket(c.env.EXPORTS),
  origin: new URL(c.req.url).origin,
});

/**
 * /exports (account login). Export ids of another account are 404, as if they did not exist. The download URLs
 * (`GET /exports/{id}/download?path&expires&signature`) carry their own authority, an HMAC of the service, as a
 * presigned URL does: they are handed out by GET /exports/{id}, not an operation of the document.
 */
export const exportRoutes = openApiApp()
  .openapi(createExportRoute, async (c) =>
    c.json(await createExport(exportServices(c), { accountId: c.var.account.id, body: c.req.valid("json") }), 202),
  )
  .openapi(listExportsRoute, async (c) => c.json(await listExports(c.var.services.db, c.var.account.id), 200))
  .openapi(getExportRoute, async (c) =>
    c.json(await getExport(exportServices(c), { accountId: c.var.account.id, id: c.req.valid("param").id }), 200),
  )
  .get("/:id/download", async (c) => {
    const parsed = downloadQuery.safeParse(c.req.query());
    validationHook({ target: "query", success: parsed.success, error: parsed.error });
    const query = parsed.data!;
    const object = await downloadFile(exportServices(c), {
      id: c.req.param("id"),
      path: query.path,
      expires: Number(query.expires),
      signature: query.signature,
    });
    return new Response(object.body, {
      headers: {
        "Content-Type": object.httpMetadata?.contentType ?? "application/octet-stream",
        "Content-Length": String(object.size),
        "Cache-Control": "private, no-store",
      },
    });
  });
