import { createRoute } from "@hono/zod-openapi";
import { jsonResponse, type OpenApiApp } from "../../http/openapi.ts";
import { noQuery } from "../../http/query.ts";
import { operation } from "../../operation/operation.ts";
import { Account } from "../schema.ts";
import { accountView } from "../service.ts";

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

export const registerGetAccount = (app: OpenApiApp) => app.openapi(getAccountRoute, (c) => c.json(accountView(c.var.account), 200));
