import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { CreatedApiKey, createKeyBody } from "../schema.ts";
import { createApiKey } from "../service.ts";
import { common } from "./common.ts";

const createApiKeyRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/",
    operationId: "createApiKey",
    summary: "Create an API key",
    description:
      "The full key is in this response only: store it now. At most 100 keys per account that can authenticate (active ones, and " +
      "rotated ones still in their grace; then 409). With `expires_at`, the key is refused (401) from that instant on. With " +
      "`allowed_ips`, a request from elsewhere is 403; with `scopes`, a route outside them is 403 (neither is counted against the key).",
    request: {
      query: noQuery,
      body: jsonBody(createKeyBody, "A descriptive name, 1–100 characters; optional expiry, allowed_ips and scopes"),
    },
    errors: { conflict: true },
    responses: { 201: jsonResponse("The new key, with its full value", CreatedApiKey, ["Cache-Control"]) },
  }),
);

export const registerCreateApiKey = (app: OpenApiApp) =>
  app.openapi(createApiKeyRoute, async (c) => {
    const created = await createApiKey(c.var.services, { accountId: c.var.account.id, fields: c.req.valid("json") });
    return c.json(created, 201, { "Cache-Control": "no-store" });
  });
