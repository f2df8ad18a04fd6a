import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { Export, exportBody } from "../schema.ts";
import { createExport, DOWNLOAD_URL_SECONDS, MAX_RUNNING_EXPORTS, MAX_SCHEDULED_EXPORTS } from "../service.ts";
import { common, exportServices } from "./common.ts";

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

export const registerCreateExport = (app: OpenApiApp) =>
  app.openapi(createExportRoute, async (c) =>
    c.json(await createExport(exportServices(c), { accountId: c.var.account.id, body: c.req.valid("json") }), 202),
  );
