import { buildApp } from "./app.ts";
import type { Env } from "./env.ts";

const app = buildApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>;
