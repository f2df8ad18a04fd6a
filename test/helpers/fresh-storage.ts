import { listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import pLimit from "p-limit";
import { forgetIsolateMemory } from "../../src/platform/isolate-memory.ts";
import { bucketName } from "../../src/rate-limit/buckets.ts";
import { ABORTED_FOR_THE_NEXT_FILE } from "./abort-reason.ts";
import { ADMIN_SUBJECT } from "./tokens.ts";

/**
 * The workers project runs its files one after another in a few shared runtimes (`isolate: false` in vitest.config.ts:
 * a runtime started per file was most of `npm test`'s time). So each file starts by emptying what the files before
 * it left, and begins as it did in a runtime of its own: the migrated, empty schema, empty buckets, no Durable Object
 * state it could meet, and an isolate that remembers nothing.
 */
export async function startAfresh(): Promise<void> {
  await emptyDurableObjects();
  await Promise.all([emptyDatabase(env.DB), emptyDatabase(env.ALERTS_DB)]);
  await Promise.all([emptyBucket(env.CATALOGUE), emptyBucket(env.ARCHIVE), emptyBucket(env.EXPORTS)]);
  forgetIsolateMemory();
}

/**
 * Every table's rows of a database (the main one, the alert windows' own), in one transaction. The search index follows its table through its triggers, so it is left
 * to them (its own tables are not written directly), and D1's own tables are kept; the AUTOINCREMENT counters start
 * again, as in a new database.
 */
async function emptyDatabase(d1: D1Database): Promise<void> {
  const { results } = await d1
    .prepare(
      `SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'
       AND (name NOT LIKE 'sqlite\\_%' ESCAPE '\\' OR name = 'sqlite_sequence') AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\'
       AND name NOT LIKE 'products\\_search\\_%' ESCAPE '\\' AND name <> 'd1_migrations'`,
    )
    .all<{ name: string }>();
  await d1.batch([d1.prepare("PRAGMA defer_foreign_keys = ON"), ...results.map(({ name }) => d1.prepare(`DELETE FROM "${name}"`))]);
}

async function emptyBucket(bucket: R2Bucket): Promise<void> {
  for (;;) {
    const { objects } = await bucket.list({ limit: 1000 });
    if (objects.length === 0) return;
    await bucket.delete(objects.map((object) => object.key));
  }
}

type Namespace<T extends Rpc.DurableObjectBranded | undefined> = DurableObjectNamespace<T>;
/**
 * The objects every file meets under the same names: the catalogue's builder, the stream hubs, the last-used shards,
 * and the rate-limit buckets of the default admin login and of GitHub's reports.
 */
const sharedObjects = async (): Promise<DurableObjectStub[]> => [
  ...(await objectsOf(env.CATALOGUE_BUILDER)),
  ...(await objectsOf(env.STREAM_HUB)),
  ...(await objectsOf(env.LAST_USED_LOG)),
  ...[bucketName("admin", ADMIN_SUBJECT), bucketName("secret-scanning", "github")].map((name) =>
    env.RATE_LIMIT_BUCKETS.get(env.RATE_LIMIT_BUCKETS.idFromName(name)),
  ),
];
const objectsOf = async <T extends Rpc.DurableObjectBranded | undefined>(namespace: Namespace<T>): Promise<DurableObjectStub[]> =>
  (await listDurableObjectIds(namespace)).map((id) => namespace.get(id) as DurableObjectStub);
/**
 * The objects named after something a file made (a key, a webhook): no later file asks for them again, so only their
 * alarm is stopped, once, for it not to run into a later file (a key's usage flush, a webhook's retry, an export's step). The other
 * rate-limit buckets have no alarm and are named after a file's own addresses and accounts.
 */
const ownObjects = async (): Promise<DurableObjectStub[]> => [
  ...(await objectsOf(env.API_KEY_OBJECTS)),
  ...(await objectsOf(env.WEBHOOK_ENDPOINT)),
  ...(await objectsOf(env.EXPORT_RUNNER)),
];
/** The objects whose alarm was stopped in this runtime, across files (the setup module runs again for each file). */
const stopped: Set<string> = ((globalThis as { stoppedObjects?: Set<string> }).stoppedObjects ??= new Set());

/** The shared objects emptied and aborted (the next call builds an instance with nothing in memory); the others' alarms stopped. */
async function emptyDurableObjects(): Promise<void> {
  const limit = pLimit(32);
  const work = (await sharedObjects()).map((stub) =>
    limit(async () => {
      await runInDurableObject(stub, async (_object, state) => {
        await state.storage.deleteAlarm();
        await state.storage.deleteAll();
      });
      // Aborting ends the call that asks for it with an error, by design.
      await runInDurableObject(stub, (_object, state) => state.abort(ABORTED_FOR_THE_NEXT_FILE)).catch(() => undefined);
    }),
  );
  for (const stub of await ownObjects()) {
    if (stopped.has(stub.id.toString())) continue;
    stopped.add(stub.id.toString());
    work.push(limit(() => runInDurableObject(stub, (_object, state) => state.storage.deleteAlarm())));
  }
  await Promise.all(work);
}
