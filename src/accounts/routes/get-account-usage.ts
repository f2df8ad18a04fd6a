import { createRoute } from "@hono/zod-openapi";
import { AccountUsage, accountUsageQuery } from "../../api-keys/schema.ts";
import { getAccountUsage } from "../../api-keys/usage.ts";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { operation } from "../../operation/operation.ts";

const getAccountUsageRoute = createRoute(
  operation({
    method: "get",
    path: "/usage",
    operationId: "getAccountUsage",
    tags: ["Account"],
    summary: "The account's admitted and refused requests over time",
    description:
      "The sum of the account's keys, bucket by bucket, with the same granularities and windows as a key's usage. " +
      "Keys revoked or expired before the range and not used since are left out.",
    credential: "account",
    request: { query: accountUsageQuery },
    responses: { 200: jsonResponse("The account's usage", AccountUsage) },
  }),
);

export const registerGetAccountUsage = (app: OpenApiApp) =>
  app.openapi(getAccountUsageRoute, async (c) =>
    c.json(await getAccountUsage(c.var.services, { accountId: c.var.account.id, query: c.req.valid("query") }), 200),
  );
