import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { endConnectorGrants } from "./connector-grants.ts";
import { rotateApiKey } from "./rotation.ts";
import { ApiKey, ApiKeyList, apiKeyBody, CreatedApiKey, createKeyBody, KeyUsage, keyIdParam, rotateKeyBody, usageQuery } from "./schema.ts";
import { createApiKey, listApiKeys, revokeApiKey, updateApiKey } from "./service.ts";
import { getApiKeyUsage } from "./usage.ts";

const common = { tags: ["API keys"], credential: "account" as const };

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

const revokeApiKeyRoute = createRoute(
  operation({
    ...common,
    method: "delete",
    path: "/{id}",
    operationId: "revokeApiKey",
    summary: "Revoke a key, permanently",
    description:
      "The very next request with the key is refused (401); for a connector key, the very next request with any of its OAuth " +
      "tokens, and its refresh tokens no longer refresh. Revoking a revoked key answers the same record.",
    request: { params: keyIdParam, query: noQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The key record, status revoked", ApiKey) },
  }),
);

const rotateApiKeyRoute = createRoute(
  operation({
    ...common,
    method: "post",
    path: "/{id}/rotate",
    operationId: "rotateApiKey",
    summary: "Rotate a key: a new key now, the old one until the grace ends",
    description:
      "Creates a key with the same name (its full value is in this response only; `rotated_from` names the old key). The old key gets " +
      "`expires_at` = now + `grace_seconds` (or keeps an earlier expiry) and `rotated_to`; it works until then and is refused (401) " +
      "from that instant on. A revoked, expired or already rotated key is 409. At most 100 keys per account can authenticate at once, " +
      "rotated keys in their grace included: at the cap, a rotation with a grace is 409 (revoke a key, or rotate with `grace_seconds: " +
      "0`, which replaces the key at once and is allowed).",
    request: { params: keyIdParam, query: noQuery, body: { ...jsonBody(rotateKeyBody, "The grace period; optional"), required: false } },
    errors: { notFound: true, conflict: true },
    responses: { 201: jsonResponse("The new key, with its full value", CreatedApiKey, ["Cache-Control"]) },
  }),
);

const getApiKeyUsageRoute = createRoute(
  operation({
    ...common,
    method: "get",
    path: "/{id}/usage",
    operationId: "getApiKeyUsage",
    summary: "A key's admitted and refused requests over time",
    description:
      "Counted by the key's own rate-limit object on every decision: per minute for the last 24 h, per hour for the last 30 days, per " +
      "day for the last year. Every bucket of the range is listed, oldest first, zeros included.",
    request: { params: keyIdParam, query: usageQuery },
    errors: { notFound: true },
    responses: { 200: jsonResponse("The key's usage", KeyUsage) },
  }),
);

/** /api-keys (account login). Another account's key ids are 404, as if they did not exist. */
export const apiKeyRoutes = openApiApp()
  .openapi(createApiKeyRoute, async (c) => {
    const created = await createApiKey(c.var.services, { accountId: c.var.account.id, fields: c.req.valid("json") });
    return c.json(created, 201, { "Cache-Control": "no-store" });
  })
  .openapi(listApiKeysRoute, async (c) => c.json(await listApiKeys(c.var.services.db, c.var.account.id), 200))
  .openapi(rotateApiKeyRoute, async (c) => {
    // An absent body is optional and so not validated: parsing {} gives the default grace.
    const { grace_seconds } = rotateKeyBody.parse(c.req.valid("json") ?? {});
    const key = { accountId: c.var.account.id, id: c.req.valid("param").id };
    const created = await rotateApiKey(c.var.services, { ...key, graceSeconds: grace_seconds });
    return c.json(created, 201, { "Cache-Control": "no-store" });
  })
  .openapi(getApiKeyUsageRoute, async (c) => {
    const key = { accountId: c.var.account.id, id: c.req.valid("param").id };
    return c.json(await getApiKeyUsage(c.var.services, { ...key, query: c.req.valid("query") }), 200);
  })
  .openapi(updateApiKeyRoute, async (c) => {
    const key = { accountId: c.var.account.id, id: c.req.valid("param").id };
    return c.json(await updateApiKey(c.var.services, { ...key, patch: c.req.valid("json") }), 200);
  })
  .openapi(revokeApiKeyRoute, async (c) => {
    const revoked = await revokeApiKey(c.var.services, { accountId: c.var.account.id, id: c.req.valid("param").id });
    // Its object refuses the key's OAuth tokens already; its grant ends too, so the client's refresh fails as well.
    if (revoked.kind === "connector") await endConnectorGrants(c.var.services.oauth, revoked.id);
    return c.json(revoked, 200);
  });
