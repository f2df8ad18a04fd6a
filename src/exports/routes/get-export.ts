import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { ExportDetail, exportIdParam } from "../schema.ts";
import { getExport } from "../service.ts";
import { common, exportServices } from "./common.ts";

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

export const registerGetExport = (app: OpenApiApp) =>
  app.openapi(getExportRoute, async (c) =>
    c.json(await getExport(exportServices(c), { accountId: c.var.account.id, id: c.req.valid("param").id }), 200),
  );
