import { defineConfig } from "drizzle-kit";

// The alert windows' own D1 database (the ALERTS_DB binding in wrangler.toml): drizzle-kit only generates SQL here;
// wrangler (and the tests) apply migrations-alerts/. Generate with `npx drizzle-kit generate --config drizzle-alerts.config.ts`.
export default defineConfig({
  dialect: "sqlite",
  schema: ["./src/alerts/tables.ts"],
  out: "./migrations-alerts",
});
