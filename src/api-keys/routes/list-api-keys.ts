import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { ApiKeyList } from "../schema.ts";
import { listApiKeys } from "../service.ts";
import { common } from "./common.ts";

const listApiKeysRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/",
    operationId: "listApiKeys",
    summary: "List the account's keys",
    description: "Newest first, revoked keys included; prefixes only, never a full key.",
    request: { query: noQuery },
    responses: { 200: jsonResponse("The keys", ApiKeyList) },
  }),
);

export const registerListApiKeys = (app: OpenApiApp) =>
  app.openapi(listApiKeysRoute, async (c) => c.json(await listApiKeys(c.var.services.db, c.var.account.id), 200));
