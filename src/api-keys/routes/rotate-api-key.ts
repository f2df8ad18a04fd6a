import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { rotateApiKey } from "../rotation.ts";
import { CreatedApiKey, keyIdParam, rotateKeyBody } from "../schema.ts";
import { common } from "./common.ts";

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

export const registerRotateApiKey = (app: OpenApiApp) =>
  app.openapi(rotateApiKeyRoute, async (c) => {
    // An absent body is optional and so not validated: parsing {} gives the default grace.
    const { grace_seconds } = rotateKeyBody.parse(c.req.valid("json") ?? {});
    const key = { accountId: c.var.account.id, id: c.req.valid("param").id };
    const created = await rotateApiKey(c.var.services, { ...key, graceSeconds: grace_seconds });
    return c.json(created, 201, { "Cache-Control": "no-store" });
  });
