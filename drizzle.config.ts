import { defineConfig } from "drizzle-kit";

// drizzle-kit only generates SQL here; wrangler (and the tests) apply migrations/.
export default defineConfig({
  dialect: "sqlite",
  schema: ["./src/platform/tables.ts", "./src/platform/background-tables.ts", "./src/exports/tables.ts"],
  out: "./migrations",
});
