import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { operation } from "../../operation/operation.ts";
import { KeyUsage, keyIdParam, usageQuery } from "../schema.ts";
import { getApiKeyUsage } from "../usage.ts";
import { common } from "./common.ts";

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

export const registerGetApiKeyUsage = (app: OpenApiApp) =>
  app.openapi(getApiKeyUsageRoute, async (c) => {
    const key = { accountId: c.var.account.id, id: c.req.valid("param").id };
    return c.json(await getApiKeyUsage(c.var.services, { ...key, query: c.req.valid("query") }), 200);
  });
