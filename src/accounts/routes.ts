import { createRoute } from "@hono/zod-openapi";
import { requireAccount, requireScope } from "../auth/guards.ts";
import { jsonBody, jsonResponse, openApiApp, operation } from "../http/openapi.ts";
import { noQuery } from "../http/query.ts";
import { Account, accountIdParam, planBody } from "./schema.ts";
import { accountView, setPlan } from "./service.ts";

const getAccount = createRoute(
  operation({
    method: "get",
    path: "/",
    operationId: "getAccount",
    tags: ["Account"],
    summary: "The signed-in account: plan and limits",
    description: "The account is created on the Free plan the first time its login is seen.",
    credential: "account",
    middleware: [requireAccount],
    request: { query: noQuery },
    responses: { 200: jsonResponse("The account", Account) },
  }),
);

/** GET /account (account login). */
export const accountRoutes = openApiApp().openapi(getAccount, (c) => c.json(accountView(c.var.account), 200));

const setAccountPlan = createRoute(
  operation({
    method: "put",
    path: "/{id}/plan",
    operationId: "setAccountPlan",
    tags: ["Admin"],
    summary: "Change an account's plan",
    description: "Creates the account if it is new. Every active key of the account has the new limits on its next request.",
    credential: "admin",
    scope: "accounts:write",
    middleware: [requireScope("accounts:write")],
    request: { params: accountIdParam, query: noQuery, body: jsonBody(planBody, "The new plan") },
    responses: { 200: jsonResponse("The account with its new plan", Account) },
  }),
);

/** PUT /admin/accounts/:id/plan (admin, scope accounts:write). */
export const adminAccountRoutes = openApiApp().openapi(setAccountPlan, async (c) => {
  const { db, limiter } = c.var.ctx;
  return c.json(accountView(await setPlan(db, limiter, c.req.valid("param").id, c.req.valid("json").plan)), 200);
});
