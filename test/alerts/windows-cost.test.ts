import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { matchInEnvironments } from "../../src/alerts/environments.ts";
import type { AlertRule } from "../../src/alerts/rules.ts";
import { windowWork } from "../../src/alerts/windows.ts";
import { archiveHistory } from "../../src/catalogue/history-archive.ts";
import type { EventMessage } from "../../src/events/messages.ts";
import { database } from "../../src/platform/db.ts";
import type { Environment } from "../../src/platform/tables.ts";
import { DAY_MS, MINUTE_MS } from "../../src/platform/time.ts";
import { factSources } from "../helpers/sandbox.ts";
import { testEvent } from "../helpers/webhooks.ts";

/**
 * A hub's publish (src/stream/hub.ts) runs the alert rules once over its events for all its streams: its work is
 * O(events × distinct windows), not O(events² × windows) (issue 47, finding 5: 300 events × 160 windows took 3 s more,
 * every window question looking through every history row the page read). Counted, not timed: `windowWork.steps` is
 * every binary-search probe, range lookup and entry indexed while answering the windows.
 */

const PRODUCTS = 30;
const CHANGES = 10; // per product: 300 events
const WINDOWS = Array.from({ length: 160 }, (_, i) => i + 3); // new_low_days 3 … 162, all past D1's 2 days
const now = Date.now();
const at = (ms: number) => new Date(now - ms).toISOString();
const productId = (p: number) => `prd_cost_${String(p).padStart(2, "0")}`;
const d1 = () => database(env.DB).$client;

/** Every price each offer held, oldest first, as [ms ago, minor units]; the test decides from these by brute force. */
const prices = new Map<string, [number, number][]>();
const messages: EventMessage[] = [];

beforeAll(async () => {
  const archived: [string, number, string][] = [];
  for (let p = 0; p < PRODUCTS; p++) {
    // Folded out of the offers' days (older than the feed's 30 days + 2): a high and a low far back for some offers.
    const own: [number, number][] = [[200 * DAY_MS, 1200]];
    if (p % 5 === 0) own.push([(60 + 3 * p) * DAY_MS, 700], [(50 + 3 * p) * DAY_MS, 1500]);
    own.push([40 * DAY_MS, 1200]);
    if (p % 3 === 0) own.push([(3 + p) * DAY_MS + 5 * MINUTE_MS, 800]); // a low some windows see and others do not
    own.push([2.5 * DAY_MS, 1000]);
    for (const [ago, minor] of own) archived.push([productId(p), minor, at(ago)]);
    prices.set(productId(p), own);
  }
  await d1().batch([
    d1().prepare("INSERT INTO competitors (id, name, domain) VALUES ('cmp_cost', 'Cost', NULL)"),
    d1()
      .prepare(
        `INSERT INTO products (id, sku, name, created_at, updated_at)
         SELECT value, 'SKU-' || value, value, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z' FROM json_each(?)`,
      )
      .bind(JSON.stringify(Array.from({ length: PRODUCTS }, (_, p) => productId(p)))),
    insertHistory(archived),
  ]);
  while ((await archiveHistory(database(env.DB), database(env.ALERTS_DB), env.ARCHIVE)) > 0);
  // The changes of the last minutes: in D1, each with its event, as an ingestion leaves them.
  const recent: [string, number, string][] = [];
  for (let j = 0; j < CHANGES; j++)
    for (let p = 0; p < PRODUCTS; p++) {
      const own = prices.get(productId(p))!;
      const [ago, newMinor] = [(CHANGES - j) * MINUTE_MS - p, 900 + ((j * 37 + p * 11) % 700)];
      const oldMinor = own.at(-1)![1];
      own.push([ago, newMinor]);
      recent.push([productId(p), newMinor, at(ago)]);
      messages.push({
        kind: "event",
        event: testEvent("price.changed", {
          product_id: productId(p),
          competitor_id: "cmp_cost",
          currency: "USD",
          observed_at: at(ago),
        }),
        price_change: { old_minor: oldMinor, new_minor: newMinor },
      });
    }
  await insertHistory(recent).run();
});

function insertHistory(rows: [string, number, string][]) {
  return d1()
    .prepare(
      `INSERT INTO price_history (product_id, competitor_id, price_minor, currency, in_stock, observed_at)
       SELECT value ->> 0, 'cmp_cost', value ->> 1, 'USD', 1, value ->> 2 FROM json_each(?)`,
    )
    .bind(JSON.stringify(rows));
}

/** The prices held in an N-day window, by brute force: it opens at 00:00 UTC of its first day (docs/webhooks.md). */
function heldInWindow(message: EventMessage, days: number): number[] {
  const changedAgo = now - Date.parse(String(message.event.data.observed_at));
  const opensAgo = now - Date.parse(`${new Date(now - changedAgo - days * DAY_MS).toISOString().slice(0, 10)}T00:00:00.000Z`);
  const own = prices.get(String(message.event.data.product_id))!;
  const held = own.filter(([ago]) => ago <= opensAgo && ago > changedAgo).map(([, minor]) => minor);
  const opening = own.filter(([ago]) => ago > opensAgo).at(-1);
  if (opening) held.push(opening[1]);
  return held;
}

const isNewLow = (message: EventMessage, days: number) =>
  message.price_change!.new_minor < Math.min(message.price_change!.old_minor, ...heldInWindow(message, days));
const isNewHigh = (message: EventMessage, days: number) =>
  message.price_change!.new_minor > Math.max(message.price_change!.old_minor, ...heldInWindow(message, days));

describe("a hub's publish of 300 price changes to streams of 160 distinct windows", () => {
  it("answers every window with work O(events × windows), and decides as brute force does", async () => {
    const streams: (AlertRule & { accountId: string; environment: Environment; days: number })[] = WINDOWS.map((days) => ({
      minChangeBp: 0,
      filters: { new_low_days: days },
      accountId: `acc_cost_${days}`,
      environment: "live",
      days,
    }));
    windowWork.steps = 0;
    const matched = await matchInEnvironments(factSources(database(env.DB)), messages, streams);
    const questions = messages.length * WINDOWS.length;
    console.log(
      `${messages.length} events × ${WINDOWS.length} windows: ${windowWork.steps} steps, ${windowWork.steps / questions} a question`,
    );
    expect(windowWork.steps).toBeLessThanOrEqual(32 * questions);

    const decided = new Set(matched.map(({ event, rule }) => `${event.id}/${rule.days}`));
    const expected = messages.flatMap((message) =>
      WINDOWS.filter((days) => isNewLow(message, days)).map((days) => `${message.event.id}/${days}`),
    );
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThan(questions); // some windows see the 8.00, some not
    expect([...decided].sort()).toEqual(expected.sort());
  });

  it("new_high_days over the same history decides as brute force does, the folded days included", async () => {
    const folded = await env.ALERTS_DB.prepare("SELECT count(*) AS n FROM offer_price_far WHERE product_id LIKE 'prd_cost_%'").first<{
      n: number;
    }>();
    expect(folded!.n).toBe(PRODUCTS); // every offer's days past the feed's 30 days + 2 are folded
    const windows = WINDOWS.filter((days) => days % 8 === 0);
    const streams = windows.map((days) => ({
      minChangeBp: 0,
      filters: { new_high_days: days },
      accountId: `acc_cost_high_${days}`,
      environment: "live" as const,
      days,
    }));
    const matched = await matchInEnvironments(factSources(database(env.DB)), messages, streams);
    const decided = matched.map(({ event, rule }) => `${event.id}/${rule.days}`).sort();
    const expected = messages.flatMap((message) =>
      windows.filter((days) => isNewHigh(message, days)).map((days) => `${message.event.id}/${days}`),
    );
    expect(expected.length).toBeGreaterThan(0);
    expect(decided).toEqual(expected.sort());
  });
});
