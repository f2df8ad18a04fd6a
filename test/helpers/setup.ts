import { applyD1Migrations, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll } from "vitest";
import { catalogueBuilder } from "../../src/catalogue/client.ts";

// Storage is isolated per test file; each file starts from the migrated, empty schema.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);

// An ingestion pokes the catalogue builder, which arms an alarm 300 ms ahead. One still pending when a
// file ends would fire during its teardown and hold the run up: run it now instead.
afterAll(async () => {
  await runDurableObjectAlarm(catalogueBuilder(env));
});
