import { createRoute } from "@hono/zod-openapi";
import { requireAccount } from "../auth/guards.ts";
import { jsonBody, jsonResponse, openApiApp, operation } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { ApiKey, apiKeyBody, ApiKeyList, CreatedApiKey, keyIdParam } from "./schema.ts";
import { apiKeyView, createApiKey, listApiKeys, renameApiKey, revokeApiKey } from "./service.ts";

const common = { tags: ["API keys"], credential: "account" as const, middleware: [requireAccount] };

const createKey = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/",
    operationId: "createApiKey",
    summary: "Create an API key",
    description: "The full key is in this response only: store it now. At most 100 active keys per account (then 409).",
    request: { query: noQuery, body: jsonBody(apiKeyBody, "A descriptive name, 1–100 characters") },
    errors: { conflict: true },
    responses: { 201: jsonResponse("The new key, with its full value", CreatedApiKey, ["Cache-Control"]) },
  }),
);

const listKeys = createRoute(
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

const renameKey = createRoute(
  operation({
    ...common,
    method: "patch",
    path: "/{id}",
    operationId: "renameApiKey",
    summary: "Rename a key",
    description: "Only the name changes; a revoked key can be renamed and stays revoked.",
    request: { params: keyIdParam, query: noQuery, body: jsonBody(apiKeyBody, "The new name, 1–100 characters") },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The key record", ApiKey) },
  }),
);

const revokeKey = createRoute(
  operation({
    ...common,
    method: "delete",
    path: "/{id}",
    operationId: "revokeApiKey",
    summary: "Revoke a key, permanently",
    description: "The very next request with the key is refused (401). Revoking a revoked key answers the same record.",
    request: { params: keyIdParam, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The key record, status revoked", ApiKey) },
  }),
);

/** /api-keys (account login). Another account's key ids are 404, as if they did not exist. */
export const apiKeyRoutes = openApiApp()
  .openapi(createKey, async (c) => {
    const { db, config } = c.var.ctx;
    const created = await createApiKey(db, c.var.account.id, c.req.valid("json").name, config.KEY_PREFIX);
    return c.json(created, 201, { "Cache-Control": "no-store" });
  })
  .openapi(listKeys, async (c) => {
    const rows = await listApiKeys(c.var.ctx.db, c.var.account.id);
    return c.json({ api_keys: rows.map(apiKeyView) }, 200);
  })
  .openapi(renameKey, async (c) => {
    const row = await renameApiKey(c.var.ctx.db, c.var.account.id, c.req.valid("param").id, c.req.valid("json").name);
    return c.json(apiKeyView(row), 200);
  })
  .openapi(revokeKey, async (c) => {
    const { db, limiter } = c.var.ctx;
    return c.json(apiKeyView(await revokeApiKey(db, limiter, c.var.account.id, c.req.valid("param").id)), 200);
  });
