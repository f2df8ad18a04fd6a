import { createRoute } from "@hono/zod-openapi";
import { AccountUsage, accountUsageQuery } from "../api-keys/schema.ts";
import { getAccountUsage } from "../api-keys/usage.ts";
import { jsonBody, jsonResponse, openApiApp } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { operation } from "../operation/operation.ts";
import { Account, accountIdParam, planBody } from "./schema.ts";
import { accountView, setAccountPlan } from "./service.ts";

const getAccountRoute = createRoute(
  operation({
    method: "get",
    path: "/",
    operationId: "getAccount",
    tags: ["Account"],
    summary: "The signed-in account: plan and limits",
    description: "The account is created on the Free plan the first time its login is seen.",
    credential: "account",
    request: { query: noQuery },
    responses: { 200: jsonResponse("The account", Account) },
  }),
);

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

/** GET /account, GET /account/usage (account login). */
export const accountRoutes = openApiApp()
  .openapi(getAccountRoute, (c) => c.json(accountView(c.var.account), 200))
  .openapi(getAccountUsageRoute, async (c) =>
    c.json(await getAccountUsage(c.var.services, { accountId: c.var.account.id, query: c.req.valid("query") }), 200),
  );

const setAccountPlanRoute = createRoute(
  operation({
    method: "put",
    path: "/{id}/plan",
    operationId: "setAccountPlan",
    tags: ["Admin"],
    summary: "Change an account's plan",
    description: "Creates the account if it is new. Every active key of the account has the new limits on its next request.",
    credential: "admin",
    scope: "accounts:write",
    request: { params: accountIdParam, query: noQuery, body: jsonBody(planBody, "The new plan") },
    responses: { 200: jsonResponse("The account with its new plan", Account) },
  }),
);

/** PUT /admin/accounts/:id/plan (admin, scope accounts:write). */
export const adminAccountRoutes = openApiApp().openapi(setAccountPlanRoute, async (c) =>
  c.json(await setAccountPlan(c.var.services, { accountId: c.req.valid("param").id, plan: c.req.valid("json").plan }), 200),
);
