import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { requireAccount, requireScope } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { accountView, setPlan } from "../services/accounts.ts";
import { rateLimitControl } from "../rate-limit/client.ts";
import { parseJsonBody, parseWith } from "../validation.ts";
import { accountIdParam, planBody } from "./schemas.ts";

export const accountRoutes = new Hono<AppEnv>().get("/", requireAccount, (c) => c.json(accountView(c.var.account)));

export const adminAccountRoutes = new Hono<AppEnv>().put("/:id/plan", requireScope("accounts:write"), async (c) => {
  const id = parseWith(accountIdParam, c.req.param("id"), "account id");
  const { plan } = await parseJsonBody(c, planBody);
  return c.json(accountView(await setPlan(database(c.env.DB, c.var.work), rateLimitControl(c.env), id, plan)));
});
