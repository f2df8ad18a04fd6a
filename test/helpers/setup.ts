import { applyD1Migrations, listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, vi } from "vitest";
import type { CatalogueBuilder } from "../../src/catalogue/snapshot/builder.ts";
import { catalogueBuilder } from "../../src/catalogue/snapshot/stub.ts";
import { startAfresh } from "./fresh-storage.ts";

// Each file starts from the migrated, empty schema, whatever the files before it in this runtime left.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
await applyD1Migrations(env.ALERTS_DB, env.TEST_ALERTS_MIGRATIONS);
await startAfresh();
vi.restoreAllMocks();
vi.useRealTimers();

/*
 * A file must leave no catalogue work behind. An ingestion pokes the builder, and its alarms then run
 * one build step each, re-arming until the snapshot is current; the last one logs the build report.
 * A console.log made in an alarm's I/O context is parked by @cloudflare/vitest-plugin until the test
 * runner sends its next message, while Vitest waits for that log's reply before it reports the file
 * finished: a log made after the file's last message hangs the run for ever, idle (a harness
 * limitation: cloudflare/workers-sdk issue 15719). So, once the file's tests are done, finish whatever
 * build or clean-up is due here, in the runner's turn, and disarm the alarm.
 */
afterAll(async () => {
  if ((await listDurableObjectIds(env.CATALOGUE_BUILDER)).length === 0) return; // never poked
  await runInDurableObject(catalogueBuilder(env), async (builder: CatalogueBuilder, state) => {
    await builder.build(); // runs after an alarm step in flight (steps are serial), then to the end
    await state.storage.deleteAlarm();
  });
});

/**
 * The same for exports: a runner whose step keeps failing (a generated destination no test answers) retries on its
 * alarm for minutes and logs each failure. Once the file's tests are done, its runners' alarms are disarmed (a step in
 * flight ends first: the object runs one thing at a time).
 */
afterAll(async () => {
  for (const id of await listDurableObjectIds(env.EXPORT_RUNNER))
    await runInDurableObject(env.EXPORT_RUNNER.get(id), (_, state) => state.storage.deleteAlarm());
});
