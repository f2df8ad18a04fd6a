import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-env.ts";
import { requireAccount } from "../auth/credentials.ts";
import { database } from "../db/client.ts";
import { WEBHOOK_EVENT_TYPES } from "../db/schema.ts";
import { createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, sendTestEvent, webhookView } from "../services/webhooks.ts";
import { parseJsonBody, parseQuery } from "../validation.ts";
import { webhookUrlProblem } from "../webhooks/url-policy.ts";
import { noQuery } from "./catalogue-queries.ts";
import { jsonObject, required } from "./schemas.ts";

/** min_change_pct: 0 to 1000 (a price can more than double), at most 2 decimals; stored as basis points. */
const minChangePct = z
  .number({ error: required("number") })
  .min(0, { error: "must be between 0 and 1000" })
  .max(1000, { error: "must be between 0 and 1000" })
  .refine((pct) => Math.abs(pct * 100 - Math.round(pct * 100)) < 1e-6, { error: "must have at most 2 decimals" })
  .transform((pct) => Math.round(pct * 100));

/** The body schema; whether http:// and private hosts are allowed depends on WEBHOOK_ALLOW_INSECURE_URLS. */
function webhookBody(allowInsecure: boolean) {
  return z.strictObject(
    {
      url: z
        .string({ error: required("string") })
        .trim()
        .superRefine((url, ctx) => {
          const problem = webhookUrlProblem(url, allowInsecure);
          if (problem) ctx.addIssue({ code: "custom", message: problem, input: url });
        })
        .transform((url) => new URL(url).href),
      events: z
        .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(", ")}` }), { error: required("array") })
        .min(1, { error: "must name at least one event type" })
        .transform((events) => WEBHOOK_EVENT_TYPES.filter((type) => events.includes(type)))
        .default([...WEBHOOK_EVENT_TYPES]),
      min_change_pct: minChangePct.default(0),
      description: z
        .string({ error: required("string") })
        .trim()
        .max(500, { error: "must be at most 500 characters" })
        .nullable()
        .default(null),
    },
    jsonObject,
  );
}
const bodies = { secure: webhookBody(false), insecure: webhookBody(true) };

/** Account login. Webhook ids of another account are 404, as if they did not exist. */
export const webhookRoutes = new Hono<AppEnv>()
  .use(requireAccount)
  .post("/", async (c) => {
    const body = await parseJsonBody(c, c.var.config.WEBHOOK_ALLOW_INSECURE_URLS ? bodies.insecure : bodies.secure);
    const created = await createWebhook(database(c.env.DB, c.var.work), c.var.config.WEBHOOK_SECRET_KEY, c.var.account.id, {
      url: body.url,
      events: body.events,
      minChangeBp: body.min_change_pct,
      description: body.description || null,
    });
    return c.json(created, 201, { "Cache-Control": "no-store" });
  })
  .get("/", async (c) => {
    parseQuery(c, noQuery);
    const rows = await listWebhooks(database(c.env.DB, c.var.work), c.var.account.id);
    return c.json({ webhooks: rows.map(webhookView) });
  })
  .get("/:id", async (c) => {
    parseQuery(c, noQuery);
    return c.json(webhookView(await getWebhook(database(c.env.DB, c.var.work), c.var.account.id, c.req.param("id"))));
  })
  .delete("/:id", async (c) => {
    await deleteWebhook(database(c.env.DB, c.var.work), c.var.account.id, c.req.param("id"));
    return c.body(null, 204);
  })
  .post("/:id/test", async (c) => {
    return c.json(await sendTestEvent(database(c.env.DB, c.var.work), c.env.WEBHOOK_QUEUE, c.var.account.id, c.req.param("id")), 202);
  })
  .get("/:id/deliveries", async (c) => {
    parseQuery(c, noQuery);
    return c.json(await listDeliveries(database(c.env.DB, c.var.work), c.var.account.id, c.req.param("id")));
  });
