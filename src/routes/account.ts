import { createRoute } from "@hono/zod-openapi";
import { z } from "zod";
import { requireAccount, requireScope } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { accountView, setPlan } from "../services/accounts.ts";
import { rateLimitControl } from "../rate-limit/client.ts";
import { parseJsonBody } from "../validation.ts";
import { jsonBody, jsonResponse, openApiApp, operation, serve } from "./openapi.ts";
import { Account } from "./responses.ts";
import { accountIdParam, planBody } from "./schemas.ts";

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
    responses: { 200: jsonResponse("The account", Account) },
  }),
);

export const accountRoutes = openApiApp();
serve(accountRoutes, getAccount, (c) => c.json(accountView(c.var.account), 200));

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
    request: {
      params: z.object({ id: accountIdParam.meta({ description: "The account id: its login's `sub`", example: "auth0|64f1c2" }) }),
      body: jsonBody(planBody, "The new plan"),
    },
    responses: { 200: jsonResponse("The account with its new plan", Account) },
  }),
);

export const adminAccountRoutes = openApiApp();
serve(adminAccountRoutes, setAccountPlan, async (c) => {
  const { id } = c.req.valid("param");
  const { plan } = await parseJsonBody(c, planBody);
  return c.json(accountView(await setPlan(database(c.env.DB, c.var.work), rateLimitControl(c.env), id, plan)), 200);
});
