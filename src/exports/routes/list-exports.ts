import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { ExportList } from "../schema.ts";
import { listExports } from "../service.ts";
import { common } from "./common.ts";

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

export const registerListExports = (app: OpenApiApp) =>
  app.openapi(listExportsRoute, async (c) => c.json(await listExports(c.var.services.db, c.var.account.id), 200));
