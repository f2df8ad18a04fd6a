import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { ApiKey, apiKeyBody, keyIdParam } from "../schema.ts";
import { updateApiKey } from "../service.ts";
import { common } from "./common.ts";

const updateApiKeyRoute = createRoute(
  operation({
    ...common,
    method: "patch",
    path: "/{id}",
    operationId: "updateApiKey",
    summary: "Rename a key, or change where it may be used from and what it may read",
    description:
      "Any of name, allowed_ips and scopes; at least one. New restrictions apply from the key's next request. A revoked key can be " +
      "renamed and stays revoked. Values the key already has: 200 with the record.",
    request: { params: keyIdParam, query: noQuery, body: jsonBody(apiKeyBody, "The new name (1–100 characters), allowed_ips, scopes") },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The key record", ApiKey) },
  }),
);

export const registerUpdateApiKey = (app: OpenApiApp) =>
  app.openapi(updateApiKeyRoute, async (c) => {
    const key = { accountId: c.var.account.id, id: c.req.valid("param").id };
    return c.json(await updateApiKey(c.var.services, { ...key, patch: c.req.valid("json") }), 200);
  });
