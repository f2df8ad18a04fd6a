import { and, eq, inArray, sql } from "drizzle-orm";
import type { Database } from "../platform/db.ts";
import { webhookDeliveries, webhooks } from "../platform/tables.ts";

/**
 * A disabled webhook has no pending retry: its attempts still `retrying` read `abandoned`, for those of `ids` that are
 * disabled when the statement runs (by a 410, by the 5-day rule, by PATCH). Run in the same D1 batch as what disables
 * them, and after a batch of attempts (one recorded as `retrying` while another request disabled its webhook). A queued
 * retry then finds the webhook disabled and is dropped unsent (src/webhooks/delivery/attempt.ts: "gone").
 */
export const abandonRetries = (db: Database, ids: readonly string[]) =>
  db
    .update(webhookDeliveries)
    .set({ outcome: "abandoned" })
    .where(
      and(
        eq(webhookDeliveries.outcome, "retrying"),
        inArray(
          webhookDeliveries.webhookId,
          db
            .select({ id: webhooks.id })
            .from(webhooks)
            .where(
              and(
                sql`${webhooks.id} IN (SELECT value FROM json_each(${JSON.stringify([...new Set(ids)])}))`,
                eq(webhooks.status, "disabled"),
              ),
            ),
        ),
      ),
    );
