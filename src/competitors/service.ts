import { eq, sql } from "drizzle-orm";
import type { CompetitorView } from "../catalogue/schema.ts";
import { bumpCatalogueVersion } from "../catalogue/service.ts";
import { currentManifest } from "../catalogue/snapshot/read.ts";
import type { RequestServices } from "../http/app-env.ts";
import { ApiError } from "../http/errors.ts";
import { logger } from "../platform/log.ts";
import { catalogueState, competitors } from "../platform/tables.ts";
import type { CompetitorPatch } from "./schema.ts";

/**
 * Renaming a competitor, on purpose (observations never do: src/observations/changes.ts). Every offer's view
 * carries `competitor_name`, so a rename changes the view of every product the competitor sells:
 * instead of marking those products (work that grows with the catalogue, in one request), the same
 * D1 batch moves `catalogue_state.reset_version` to the new version, and the snapshot builder makes
 * one full build, in its own bounded steps (src/catalogue/snapshot/build.ts).
 */
export async function updateCompetitor(
  { db, catalogue }: Pick<RequestServices, "db" | "catalogue">,
  { id, patch }: { id: string; patch: CompetitorPatch },
): Promise<CompetitorView> {
  const row = await db.select().from(competitors).where(eq(competitors.id, id)).get();
  if (!row) throw new ApiError(404, `There is no competitor ${JSON.stringify(id)}; GET /competitors lists the ids.`);
  const next = { name: patch.name ?? row.name, domain: patch.domain === undefined ? row.domain : patch.domain };
  if (next.name !== row.name || next.domain !== row.domain) {
    await db.batch([
      db.update(competitors).set(next).where(eq(competitors.id, id)),
      bumpCatalogueVersion(db),
      db
        .update(catalogueState)
        .set({ resetVersion: sql`${catalogueState.version}` })
        .where(eq(catalogueState.id, 1)),
    ]);
    await catalogue
      .poke()
      .catch((error: unknown) => logger("catalogue").error("builder poke failed; the sweep will catch up", { error: String(error) }));
  }
  return { id, ...next, offer_count: await offerCount(catalogue.bucket, id) };
}

/**
 * The competitor's offers in the snapshot being served (as GET /competitors counts them): read from the
 * manifest, so it costs the same at any catalogue size; 0 before the first snapshot. A rename does not change it.
 */
async function offerCount(bucket: R2Bucket, id: string): Promise<number> {
  const manifest = await currentManifest(bucket);
  return manifest?.competitors.find((competitor) => competitor.id === id)?.offer_count ?? 0;
}
