import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { requireAccount } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { apiKeyView, createApiKey, listApiKeys, renameApiKey, revokeApiKey } from "../services/api-keys.ts";
import { rateLimitControl } from "../rate-limit/client.ts";
import { parseJsonBody } from "../validation.ts";
import { apiKeyBody } from "./schemas.ts";

export const apiKeyRoutes = new Hono<AppEnv>()
  .use(requireAccount)
  .post("/", async (c) => {
    const { name } = await parseJsonBody(c, apiKeyBody);
    const created = await createApiKey(database(c.env.DB, c.var.work), c.var.account.id, name, c.var.config.KEY_PREFIX);
    return c.json(created, 201, { "Cache-Control": "no-store" });
  })
  .get("/", async (c) => {
    const rows = await listApiKeys(database(c.env.DB, c.var.work), c.var.account.id);
    return c.json({ api_keys: rows.map(apiKeyView) });
  })
  .patch("/:id", async (c) => {
    const { name } = await parseJsonBody(c, apiKeyBody);
    return c.json(apiKeyView(await renameApiKey(database(c.env.DB, c.var.work), c.var.account.id, c.req.param("id"), name)));
  })
  .delete("/:id", async (c) => {
    return c.json(apiKeyView(await revokeApiKey(database(c.env.DB, c.var.work), rateLimitControl(c.env), c.var.account.id, c.req.param("id"))));
  });
