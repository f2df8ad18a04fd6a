import { createRoute } from "@hono/zod-openapi";
import { jsonBody, jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { Account, accountIdParam, planBody } from "../schema.ts";
import { setAccountPlan } from "../service.ts";

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

export const registerSetAccountPlan = (app: OpenApiApp) =>
  app.openapi(setAccountPlanRoute, async (c) =>
    c.json(await setAccountPlan(c.var.services, { accountId: c.req.valid("param").id, plan: c.req.valid("json").plan }), 200),
  );
