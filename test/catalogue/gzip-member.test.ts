import { crc32, gunzipSync, inflateRawSync } from "node:zlib";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  concatenated,
  crc32Combine,
  deflatePart,
  FINAL_BLOCK,
  GZIP_HEADER,
  gzipTrailer,
  storedPart,
} from "../../src/catalogue/snapshot/gzip-member.ts";
import { freshAccount } from "../helpers/accounts.ts";

import { oneGzipMember, rawGet } from "../helpers/gzip-member.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const utf8 = async (res: Response) => new TextDecoder().decode(await res.arrayBuffer());
const join = (...chunks: Uint8Array[]) => {
  const all = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let at = 0;
  for (const chunk of chunks) all.set(chunk, (at += chunk.length) - chunk.length);
  return all;
};

describe("crc32Combine", () => {
  it("equals the CRC-32 of the concatenation, for any two byte strings", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3000 }), fc.uint8Array({ maxLength: 3000 }), (a, b) => {
        expect(crc32Combine(crc32(a), crc32(b), b.length)).toBe(crc32(join(a, b)));
      }),
      { numRuns: 300 },
    );
  });

  it("is consistent for lengths of any size (a gzip trailer's body may pass 4 GiB): A+(B+C) = (A+B)+C", () => {
    const crc = fc.integer({ min: 0, max: 2 ** 32 - 1 });
    const length = fc.integer({ min: 0, max: 2 ** 40 });
    fc.assert(
      fc.property(crc, crc, crc, length, length, (a, b, c, lengthB, lengthC) => {
        expect(crc32Combine(crc32Combine(a, b, lengthB), c, lengthC)).toBe(crc32Combine(a, crc32Combine(b, c, lengthC), lengthB + lengthC));
      }),
      { numRuns: 300 },
    );
  });

  it("an empty second part leaves the CRC as it is; concatenated folds any number of parts", () => {
    expect(crc32Combine(crc32("abc"), crc32(""), 0)).toBe(crc32("abc"));
    const texts = ['{"products":[', "a,b", ",", "c", "]}"];
    expect(concatenated(texts.map((text) => ({ crc: crc32(text), length: bytes(text).length })))).toEqual({
      crc: crc32(texts.join("")),
      length: texts.join("").length,
    });
    expect(concatenated([])).toEqual({ crc: 0, length: 0 });
  });
});

describe("deflate parts", () => {
  it("deflated and stored parts, any mix, concatenate into one gzip member", () => {
    const parts = [
      storedPart('{"products":['),
      deflatePart('{"id":"é☕"}'.repeat(500)),
      storedPart(","),
      deflatePart(""),
      storedPart(""),
      deflatePart("x"),
      storedPart("]}"),
    ];
    const member = join(GZIP_HEADER, ...parts.map((part) => part.bytes), FINAL_BLOCK, gzipTrailer(concatenated(parts)));
    const text = `{"products":[${'{"id":"é☕"}'.repeat(500)},x]}`;
    expect(oneGzipMember(member)).toBe(text);
    expect(gunzipSync(member).toString("utf8")).toBe(text);
  });

  it("a part refers to nothing before it: a segment inflates on its own, after the final block", () => {
    const part = deflatePart("repeated text, repeated text");
    expect(inflateRawSync(join(part.bytes, FINAL_BLOCK)).toString("utf8")).toBe("repeated text, repeated text");
    expect(part.length).toBe(28);
    expect(part.crc).toBe(crc32("repeated text, repeated text"));
  });
});

describe("GET /products, empty catalogue", () => {
  it('is one gzip member of {"products":[]} (and of nothing in NDJSON), and decodes without gzip', async () => {
    const key = (await freshAccount({ plan: "premium" })).key;
    const get = async (headers: Record<string, string>) => {
      const res = await rawGet("/products", key, headers);
      expect(res.status).toBe(200);
      return res;
    };
    const json = await get({ "Accept-Encoding": "gzip" });
    expect(json.headers.get("Content-Encoding")).toBe("gzip");
    expect(oneGzipMember(new Uint8Array(await json.arrayBuffer()))).toBe('{"products":[]}');
    const ndjson = await get({ "Accept-Encoding": "gzip", Accept: "application/x-ndjson" });
    expect(oneGzipMember(new Uint8Array(await ndjson.arrayBuffer()))).toBe("");
    expect(await utf8(await get({}))).toBe('{"products":[]}');
    expect(await utf8(await get({ Accept: "application/x-ndjson" }))).toBe("");
  });
});
