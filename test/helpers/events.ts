import { env } from "cloudflare:workers";
import { inArray } from "drizzle-orm";
import type { EventMessage } from "../../src/events/messages.ts";
import { outboxRows } from "../../src/events/outbox-rows.ts";
import type { PriceChangedData, StockChangedData } from "../../src/events/schema.ts";
import { database } from "../../src/platform/db.ts";
import { newEventId } from "../../src/platform/ids.ts";
import { events } from "../../src/platform/tables.ts";
import { HOUR_MS } from "../../src/platform/time.ts";

let n = 0;

export interface CommitOptions {
  type?: "price.changed" | "stock.changed";
  /** Left as the consumer leaves a fanned-out event (default), or still the outbox's. */
  fannedOut?: boolean;
  /** A price change's minor units, one pair per event (min_change_pct reads them). */
  prices?: readonly [number, number][];
}

/**
 * Stores `count` events committed `hoursAgo` (their timestamp and commit time) straight into the
 * outbox, as an ingestion would have; returns their ids in commit order. Names are long and not ASCII.
 */
export async function commitEvents(
  hoursAgo: number,
  count: number,
  { type = "price.changed", fannedOut = true, prices }: CommitOptions = {},
): Promise<string[]> {
  const at = new Date(Date.now() - hoursAgo * HOUR_MS).toISOString();
  const messages = Array.from({ length: count }, (_, i): EventMessage => {
    const id = newEventId(at);
    const offer = {
      event_id: id,
      product_id: `prd_test${++n}`,
      sku: `SKU-${n}`,
      name: `Café ☕ ${"x".repeat(200)} ${n}`,
      competitor_id: "cmp_test",
      competitor_name: "Test shop",
      url: null,
      currency: "USD",
      observed_at: at,
    };
    // A whole payload, as the ingestion writes it (the MCP tools check theirs against the document's shapes).
    const data: PriceChangedData | StockChangedData =
      type === "price.changed"
        ? {
            ...offer,
            old_price: "10.00",
            new_price: "9.00",
            change_abs: "-1.00",
            change_pct: -10,
            direction: "down",
            old_total_price: null,
            new_total_price: null,
            lowest_price_30d: "10.00",
          }
        : { ...offer, price: "9.00", in_stock_before: true, in_stock: false };
    const message: EventMessage = { kind: "event", event: { id, type, timestamp: at, data } };
    const price = prices?.[i];
    if (price) message.price_change = { old_minor: price[0], new_minor: price[1] };
    return message;
  });
  const db = database(env.DB);
  const rows = outboxRows(messages, at);
  // Ten rows a statement: D1 binds at most 100 parameters.
  for (let i = 0; i < rows.length; i += 10) await db.insert(events).values(rows.slice(i, i + 10));
  if (fannedOut)
    await db
      .update(events)
      .set({ fannedOutAt: at })
      .where(
        inArray(
          events.id,
          messages.map((m) => m.event.id),
        ),
      );
  return messages.map((m) => m.event.id);
}
