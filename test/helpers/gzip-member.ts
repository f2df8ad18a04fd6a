import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { crc32, inflateRawSync } from "node:zlib";
import { expect } from "vitest";
import worker from "../../src/index.ts";
import { randomTestIp } from "./http.ts";

/**
 * A GET's Response from the worker itself, not through fetch (which would decode a gzip body on the
 * way): the bytes exactly as the worker hands them to the network.
 */
export async function rawGet(path: string, apiKey: string, headers: Record<string, string>): Promise<Response> {
  const request = new Request(`https://api.test${path}`, {
    headers: { Authorization: `Bearer ${apiKey}`, "CF-Connecting-IP": randomTestIp(), ...headers },
  });
  const ctx = createExecutionContext();
  const res = await worker.fetch(request, env, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

/**
 * The text of a gzip body, after checking that it is exactly ONE member (RFC 1952): a 10-byte
 * header, a deflate stream that ends exactly where the 8-byte trailer begins, and a trailer holding
 * the CRC-32 and length of the whole text. gunzip alone proves nothing here: it reads concatenated
 * members too (curl --compressed stops after the first).
 */
export function oneGzipMember(body: Uint8Array): string {
  expect([...body.subarray(0, 4)]).toEqual([0x1f, 0x8b, 8, 0]); // magic, deflate, no flags: no optional header fields
  const inflated = inflateRawSync(body.subarray(10), { info: true }) as unknown as { buffer: Buffer; engine: { bytesWritten: number } };
  expect(10 + inflated.engine.bytesWritten + 8).toBe(body.length);
  const trailer = new DataView(body.buffer, body.byteOffset + body.length - 8);
  expect(trailer.getUint32(0, true)).toBe(crc32(inflated.buffer));
  expect(trailer.getUint32(4, true)).toBe(inflated.buffer.length % 2 ** 32);
  return inflated.buffer.toString("utf8");
}
