import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { MAX_FILTERS_BYTES } from "../../src/alerts/schema.ts";
import type { DeliveryMessage, EventMessage } from "../../src/events/messages.ts";
import { freshAccount } from "../helpers/accounts.ts";
import { createProduct } from "../helpers/catalogue-factory.ts";
import { call, expectJson } from "../helpers/http.ts";
import { fetchDocument } from "../helpers/openapi.ts";
import { settled } from "../helpers/settle.ts";
import { costOf, statementsOf } from "../helpers/statements.ts";
import { hookUrl, installReceiver, type Receiver } from "../helpers/webhook-receiver.ts";
import { createWebhook, ingest, runQueue, spyOnDeliveryQueues, storeEvents, testEvent } from "../helpers/webhooks.ts";

/**
 * Webhook rules are bounded (16 KiB of JSON) and the fan-out reads only the webhooks that may match its
 * events: other webhooks' large rules add nothing to what a batch reads (contract, "Tenants apart").
 */

let receiver: Receiver;
beforeAll(() => {
  receiver = installReceiver();
});
afterAll(() => vi.restoreAllMocks());

const utf8 = new TextEncoder();
const jsonBytes = (value: unknown) => utf8.encode(JSON.stringify(value)).byteLength;

/** `{skus: [...]}` of exactly `bytes` bytes of JSON, its values unlike any event's SKU. */
function skusOfBytes(bytes: number, tag: string) {
  const skus: string[] = [];
  // Each value adds its length + 3 (quotes and comma); the last one takes what is left.
  while (jsonBytes({ skus }) + 203 <= bytes) skus.push(`${tag}-${skus.length}-`.padEnd(200, "x"));
  skus.push(`${tag}-last-`.padEnd(bytes - jsonBytes({ skus }) - 3, "x"));
  const filters = { skus };
  expect(jsonBytes(filters)).toBe(bytes);
  return filters;
}

describe("a webhook's filters", () => {
  it("are at most 16 KiB as JSON: one byte more is a 400 naming filters, on POST and PATCH", async () => {
    const { token } = await freshAccount();
    const atLimit = skusOfBytes(MAX_FILTERS_BYTES, "limit");
    const over = skusOfBytes(MAX_FILTERS_BYTES + 1, "over");
    const hook = await createWebhook(token, { url: hookUrl("size"), filters: atLimit });
    expect(hook.filters).toEqual(atLimit);

    const refusedPost = await expectJson(await call("POST", "/webhooks", { token, body: { url: hookUrl("size"), filters: over } }), 400);
    expect(refusedPost.detail).toMatch(/filters: .*16 KiB/);
    const refusedPatch = await expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body: { filters: over } }), 400);
    expect(refusedPatch.detail).toMatch(/filters: .*16 KiB/);
    expect((await expectJson(await call("GET", `/webhooks/${hook.id}`, { token }), 200)).filters).toEqual(atLimit);
  });

  it("are documented with their limit", async () => {
    const doc = await fetchDocument();
    expect(doc.components.schemas.AlertFilters.description).toMatch(/16 KiB/);
  });
});

describe("the fan-out of a batch", () => {
  const priceEvent = (sku: string): EventMessage => ({
    kind: "event",
    event: testEvent("price.changed", { sku, competitor_id: "cmp_reads", currency: "USD", old_price: "10.00", new_price: "9.00" }),
    price_change: { old_minor: 1000, new_minor: 900 },
  });

  /** The D1 reads of one queue batch's fan-out (the deliveries it queues are captured, not sent). */
  async function fanOutReads(event: EventMessage) {
    const sends = spyOnDeliveryQueues();
    for (const spy of sends.spies) spy.mockResolvedValue({} as QueueSendBatchResponse);
    try {
      await storeEvents([event]);
      const statements = await statementsOf(() => runQueue([event]));
      const costs = await costOf(statements);
      const deliveries = sends.sent().map((m) => m.body as DeliveryMessage);
      return {
        to: deliveries.map((d) => d.webhook_id),
        rowsRead: costs.reduce((sum, cost) => sum + cost.rowsRead, 0),
        bytes: costs.reduce((sum, cost) => sum + cost.bytesReturned, 0),
      };
    } finally {
      sends.restore();
    }
  }

  it("follows each webhook's lists, types and status through POST, PATCH and DELETE", async () => {
    const { token } = await freshAccount();
    await createProduct({ id: "prd_reads", sku: "READS-P", brand: "Acme", category: "Headphones" });
    const hook = await createWebhook(token, { url: hookUrl("follows"), filters: { brands: ["Acme"], skus: ["READS-P"] } });
    const event = (): EventMessage => {
      const message = priceEvent("READS-P");
      message.event.data.product_id = "prd_reads";
      return message;
    };
    const patch = async (body: Record<string, unknown>) => expectJson(await call("PATCH", `/webhooks/${hook.id}`, { token, body }), 200);
    const reaches = async () => (await fanOutReads(event())).to.includes(hook.id);

    expect(await reaches()).toBe(true); // brand (from the product) and SKU both match
    await patch({ filters: { brands: ["Acme"], skus: ["OTHER"] } });
    expect(await reaches()).toBe(false); // one list of two does not
    await patch({ filters: { categories: ["Headphones"], competitors: ["cmp_reads"] } });
    expect(await reaches()).toBe(true);
    await patch({ status: "disabled" });
    expect(await reaches()).toBe(false);
    await patch({ status: "enabled" });
    expect(await reaches()).toBe(true);
    await patch({ filters: null, events: ["stock.changed"] });
    expect(await reaches()).toBe(false); // no list: filed under its types, and price.changed is not one
    await patch({ events: ["price.changed"] });
    expect(await reaches()).toBe(true);
    expect((await call("DELETE", `/webhooks/${hook.id}`, { token })).status).toBe(204);
    expect(await reaches()).toBe(false);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM webhook_rule_values WHERE webhook_id = ?").bind(hook.id).first("n")).toBe(0);
  });

  it("reads the same with 4 accounts × 20 webhooks of ~16 KiB rules that do not match beside it; the small webhook's deliveries still arrive", async () => {
    const { token } = await freshAccount();
    const small = await createWebhook(token, { url: hookUrl("small"), filters: { competitors: ["cmp_reads"] } });
    const alone = await fanOutReads(priceEvent("READS-1"));
    expect(alone.to).toEqual([small.id]);

    for (let account = 0; account < 4; account++) {
      const other = (await freshAccount()).token;
      for (let hook = 0; hook < 20; hook++) {
        const filters = { competitors: [`cmp_other-${account}-${hook}`], ...skusOfBytes(16_000, `big-${account}-${hook}`) };
        await createWebhook(other, { url: hookUrl("big"), filters });
      }
    }
    const beside = await fanOutReads(priceEvent("READS-2"));
    expect(beside.to).toEqual([small.id]);
    console.log(`fan-out reads: alone ${JSON.stringify(alone)}, beside 80 large webhooks ${JSON.stringify(beside)}`);
    expect(Math.abs(beside.rowsRead - alone.rowsRead)).toBeLessThanOrEqual(2);
    expect(Math.abs(beside.bytes - alone.bytes)).toBeLessThanOrEqual(64);

    // The first delivery after an ingestion reads the same way, and reaches the small webhook.
    await ingest([{ sku: "READS-3", price: "10.00", competitor: { id: "cmp_reads", name: "Reads" } }]);
    await ingest([{ sku: "READS-3", price: "9.00", competitor: { id: "cmp_reads", name: "Reads" } }]);
    await settled(() => expect(receiver.to(small.url)).toHaveLength(1), 20);
  });
});
