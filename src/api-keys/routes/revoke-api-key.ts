import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { endConnectorGrants } from "../connector-grants.ts";
import { ApiKey, keyIdParam } from "../schema.ts";
import { revokeApiKey } from "../service.ts";
import { common } from "./common.ts";

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

export const registerRevokeApiKey = (app: OpenApiApp) =>
  app.openapi(revokeApiKeyRoute, async (c) => {
    const revoked = await revokeApiKey(c.var.services, { accountId: c.var.account.id, id: c.req.valid("param").id });
    // Its object refuses the key's OAuth tokens already; its grant ends too, so the client's refresh fails as well.
    if (revoked.kind === "connector") await endConnectorGrants(c.var.services.oauth, revoked.id);
    return c.json(revoked, 200);
  });
