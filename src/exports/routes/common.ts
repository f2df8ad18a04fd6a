import type { Context } from "hono";
import type { AppEnv } from "../../http/app-env.ts";
import type { ExportServices } from "../service.ts";

/** What the /exports operations share (src/exports/routes/), and the download route (src/exports/routes.ts). */

export const common = { tags: ["Exports"], credential: "account" as const };

export const exportServices = (c: Context<AppEnv>): ExportServices => ({
  db: c.var.services.db,
  config: c.var.services.config,
  work: c.var.services.work,
  runners: c.env.EXPORT_RUNNER,
  bucket: c.var.services.work.bucket(c.env.EXPORTS),
  origin: new URL(c.req.url).origin,
});
