import { describe, expect, it } from "vitest";
import { chunkMessages, type DeliveryMessage, SEND_BATCH_LIMIT } from "../../src/events/messages.ts";

/** What one sendBatch may carry in production: 256 KB. Local workerd enforces no limit, so the chunks are measured here. */
const QUEUE_BATCH_BYTES = 256 * 1024;
const utf8Bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).byteLength;

function deliveryWithName(name: string): DeliveryMessage {
  const id = `evt_${crypto.randomUUID().replaceAll("-", "")}`;
  return {
    kind: "delivery",
    webhook_id: `whk_${crypto.randomUUID().replaceAll("-", "")}`,
    event: { id, type: "price.changed", timestamp: new Date().toISOString(), data: { event_id: id, name } },
  };
}

describe("chunkMessages", () => {
  it("counts UTF-8 bytes: long CJK names (3 bytes a character) never make a batch over 256 KB", () => {
    // 4,000 characters are 4,000 UTF-16 units but 12,000 bytes; 60 of them are about 700 KB.
    const messages = Array.from({ length: 60 }, (_, i) => deliveryWithName(`価格比較の商品名${i}`.padEnd(4000, "商")));
    const chunks = chunkMessages(messages);
    expect(chunks.flat()).toEqual(messages);
    for (const chunk of chunks) expect(utf8Bytes(chunk)).toBeLessThan(QUEUE_BATCH_BYTES);
  });

  it("at most 100 messages a batch, whatever their size", () => {
    const messages = Array.from({ length: 250 }, () => deliveryWithName("x"));
    expect(chunkMessages(messages).map((chunk) => chunk.length)).toEqual([SEND_BATCH_LIMIT, SEND_BATCH_LIMIT, 50]);
  });
});
