import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { requireAccount } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { apiKeyView, createApiKey, listApiKeys, renameApiKey, revokeApiKey } from "../services/api-keys.ts";
import { rateLimitControl } from "../rate-limit/client.ts";
import { parseJsonBody } from "../validation.ts";
import { jsonBody, jsonResponse, openApiApp, operation, serve } from "./openapi.ts";
import { ApiKey, ApiKeyList, CreatedApiKey } from "./responses.ts";
import { apiKeyBody } from "./schemas.ts";

const keyId = z.object({ id: z.string().meta({ description: "The key's id (`key_…`)", example: "key_0f3c9a1d2b4e4f6a8c0d1e2f3a4b5c6d" }) });
const common = { tags: ["API keys"], credential: "account" as const, middleware: [requireAccount] };

const createKey = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/",
    operationId: "createApiKey",
    summary: "Create an API key",
    description: "The full key is in this response only: store it now. At most 100 active keys per account (then 409).",
    request: { body: jsonBody(apiKeyBody, "A descriptive name, 1–100 characters") },
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
    request: { params: keyId, body: jsonBody(apiKeyBody, "The new name, 1–100 characters") },
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
    request: { params: keyId },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The key record, status revoked", ApiKey) },
  }),
);

export const apiKeyRoutes = openApiApp();
serve(apiKeyRoutes, createKey, async (c) => {
  const { name } = await parseJsonBody(c, apiKeyBody);
  const created = await createApiKey(database(c.env.DB, c.var.work), c.var.account.id, name, c.var.config.KEY_PREFIX);
  return c.json(created, 201, { "Cache-Control": "no-store" });
});
serve(apiKeyRoutes, listKeys, async (c) => {
  const rows = await listApiKeys(database(c.env.DB, c.var.work), c.var.account.id);
  return c.json({ api_keys: rows.map(apiKeyView) }, 200);
});
serve(apiKeyRoutes, renameKey, async (c) => {
  const { name } = await parseJsonBody(c, apiKeyBody);
  return c.json(apiKeyView(await renameApiKey(database(c.env.DB, c.var.work), c.var.account.id, c.req.valid("param").id, name)), 200);
});
serve(apiKeyRoutes, revokeKey, async (c) => {
  const { id } = c.req.valid("param");
  return c.json(apiKeyView(await revokeApiKey(database(c.env.DB, c.var.work), rateLimitControl(c.env), c.var.account.id, id)), 200);
});
