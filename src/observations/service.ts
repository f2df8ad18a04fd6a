import type { EventMessage } from "../events/messages.ts";
import { ApiError } from "../http/errors.ts";
import { computeChanges, type IngestionChanges, type TouchedRows } from "./changes.ts";
import type { IngestionResult, Observation } from "./schema.ts";
import { isWriteConflict } from "./write.ts";

/**
 * Price observations in, catalogue changes and events out.
 *
 * 1. Read what the observations touch (products by sku, their offers, the competitors) in one D1 batch.
 * 2. Apply the observations in memory, oldest `observed_at` first, and work out the rows to write
 *    and the events to emit.
 * 3. Write everything in ONE D1 batch (a transaction): a guard that fails unless the products and
 *    competitors read are unchanged (and the products to create still absent), the version bump, the
 *    upserts, the history rows (src/observations/write.ts). Two concurrent ingestions of one product
 *    therefore never both compute their events against the same old offer: the later batch fails on
 *    its guard, and is read, recomputed and written again (up to 8 times); ingestions of disjoint
 *    products never fail it. The events go in the same batch, as outbox rows (src/events/outbox.ts),
 *    and so do the marks on the changed products that the catalogue snapshot is rebuilt from.
 * 4. After the commit (the target's `committed`), poke the catalogue builder (a lost poke only delays the snapshot until the cron
 *    sweep) and relay the events to WEBHOOK_QUEUE (sendBatch, ≤ 100 per call). If the relay fails the
 *    answer is still 200: the events are stored, and the cron's sweep sends them. `afterCommit` then
 *    gets the events: the request's one after-commit step (src/pipeline/after-commit.ts) publishes them to the
 *    event stream's hubs and fans them out to their first delivery, after the answer.
 *
 * Ordering: an observation changes an offer only if its `observed_at` is later than the offer's
 * `checked_at`. An older one is stale and a repeated one is a replay: both change nothing and emit
 * nothing. `observed_at` defaults to the time of the request.
 */

/** Conflicting ingestions retry after a short random pause, so those that collided do not collide again. */
const MAX_WRITE_ATTEMPTS = 8;
const pause = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));

/**
 * Where an ingestion reads and writes: the catalogue (liveTarget, src/observations/live-target.ts), or an account's sandbox
 * (its object: src/sandbox/object.ts).
 * The steps, the change detection and the events are the same for both; only the data differs.
 */
export interface IngestionTarget {
  /** Step 1: what the observations touch. */
  read(observations: readonly Observation[]): Promise<TouchedRows>;
  /**
   * Step 3: the changes and their events in one transaction, guarded by what was read (a conflict is an error that
   * isWriteConflict recognises). The events are the target's from then on (a sandbox's carry its account).
   */
  write(touched: TouchedRows, changes: IngestionChanges): Promise<void>;
  /** After the commit: what must hear of it (the catalogue's snapshot builder, the outbox's relay of its events). */
  committed(events: readonly EventMessage[]): Promise<void>;
}

export async function ingestObservations(
  store: IngestionTarget,
  {
    observations,
    afterCommit = () => {},
  }: { observations: readonly Observation[]; afterCommit?: (events: readonly EventMessage[]) => void },
): Promise<IngestionResult> {
  const now = new Date().toISOString();
  const ordered = observations
    .map((observation, index) => ({ ...observation, observed_at: observation.observed_at ?? now, index }))
    .sort((a, b) => (a.observed_at < b.observed_at ? -1 : a.observed_at > b.observed_at ? 1 : 0)); // stable: ties keep their order
  for (let attempt = 1; ; attempt++) {
    const touched = await store.read(ordered);
    const changes = computeChanges(touched, ordered, now);
    if (changes.offers.length === 0 && changes.products.length === 0 && changes.competitors.length === 0) return changes.result;
    try {
      await store.write(touched, changes);
    } catch (error) {
      if (!isWriteConflict(error)) throw error;
      if (attempt < MAX_WRITE_ATTEMPTS) {
        await pause(attempt);
        continue;
      }
      throw new ApiError(503, "Other ingestions kept changing these products during this one; send the same observations again.", {
        "Retry-After": "1",
      });
    }
    await store.committed(changes.events);
    afterCommit(changes.events);
    return changes.result;
  }
}
