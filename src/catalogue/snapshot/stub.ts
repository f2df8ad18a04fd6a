import type { WorkMeter } from "../../platform/metered.ts";
import type { SnapshotAccess } from "../service.ts";

/** The way to the CatalogueBuilder object (src/catalogue/snapshot/builder.ts), which owns the snapshot. */

export const catalogueBuilder = (env: Pick<Env, "CATALOGUE_BUILDER">) =>
  env.CATALOGUE_BUILDER.get(env.CATALOGUE_BUILDER.idFromName("catalogue"));

/**
 * For the once-a-minute cron (`scheduled` in src/index.ts): pokes the builder, so changes whose poke
 * was lost (an ingestion that died after its commit, a seed written straight into D1) are served
 * within a minute. Costs one alarm and one D1 read when nothing changed.
 */
export async function sweepSnapshot(env: Pick<Env, "CATALOGUE_BUILDER">, work: WorkMeter): Promise<void> {
  await work.called(catalogueBuilder(env).poke());
}

/** A request's way to the snapshot; its pokes count as Durable Object calls in its work tally. */
export function snapshotAccess(env: Pick<Env, "CATALOGUE" | "CATALOGUE_BUILDER">, work: WorkMeter): SnapshotAccess {
  return {
    bucket: env.CATALOGUE,
    poke: async () => {
      await work.called(catalogueBuilder(env).poke());
    },
    ensureSnapshot: async () => (await work.called(catalogueBuilder(env).ensureSnapshot())).ready,
    keepConvertedWarm: async (currency, form) => {
      await work.called(catalogueBuilder(env).keepConvertedWarm(currency, form));
    },
  };
}
