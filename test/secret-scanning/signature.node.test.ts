import { describe, expect, it } from "vitest";
import { decodeBase64, derToP1363 } from "../../src/secret-scanning/signature.ts";
import { p1363ToDer } from "../helpers/der.ts";

const filled = (length: number, byte: number) => new Uint8Array(length).fill(byte);
const der = (...bytes: number[]) => new Uint8Array(bytes);
/** SEQUENCE { INTEGER r, INTEGER s } from the integers' content bytes, lengths computed. */
const sequence = (r: number[], s: number[]) => der(0x30, r.length + s.length + 4, 0x02, r.length, ...r, 0x02, s.length, ...s);

describe("DER to IEEE P1363", () => {
  it("left-pads short integers and drops the sign byte of long ones", () => {
    const r = [0x00, ...filled(32, 0xff)]; // top bit set: DER adds 0x00
    const s = [0x01]; // s = 1: one byte
    const raw = derToP1363(sequence(r, s))!;
    expect(raw).toHaveLength(64);
    expect([...raw.subarray(0, 32)]).toEqual([...filled(32, 0xff)]);
    expect([...raw.subarray(32)]).toEqual([...filled(31, 0), 1]);
  });

  it("round-trips r and s with leading zero bytes", () => {
    for (const [rLead, sLead] of [
      [1, 0],
      [0, 2],
      [3, 5],
      [31, 31],
    ] as const) {
      const raw = new Uint8Array(64).fill(0x5a);
      raw.fill(0, 0, rLead);
      raw.fill(0, 32, 32 + sLead);
      expect([...derToP1363(p1363ToDer(raw))!]).toEqual([...raw]);
    }
  });

  it.each([
    ["empty", der()],
    ["not a SEQUENCE", der(0x31, 6, 0x02, 1, 1, 0x02, 1, 1)],
    ["SEQUENCE length too long", der(0x30, 7, 0x02, 1, 1, 0x02, 1, 1)],
    ["SEQUENCE length too short", der(0x30, 5, 0x02, 1, 1, 0x02, 1, 1)],
    ["long-form length", der(0x30, 0x81, 6, 0x02, 1, 1, 0x02, 1, 1)],
    ["trailing byte inside", sequence([1], [1, 0]).slice(0, -1)],
    ["r not an INTEGER", der(0x30, 6, 0x04, 1, 1, 0x02, 1, 1)],
    ["s missing", der(0x30, 3, 0x02, 1, 1)],
    ["r empty", sequence([], [1])],
    ["r negative", sequence([0x80, ...filled(31, 1)], [1])],
    ["r zero", sequence([0], [1])],
    ["r with a needless 0x00", sequence([0x00, 0x7f], [1])],
    ["r longer than 32 bytes", sequence([0x00, 0x01, ...filled(32, 1)], [1])],
    ["r 33 bytes without the sign byte", sequence(filled(33, 0x11) as unknown as number[], [1])],
    ["s integer length past the end", der(0x30, 6, 0x02, 1, 1, 0x02, 5, 1)],
    ["bytes after the SEQUENCE", der(0x30, 6, 0x02, 1, 1, 0x02, 1, 1, 0)],
  ])("refuses %s", (_, bytes) => {
    expect(derToP1363(bytes)).toBeUndefined();
  });

  it("refuses base64 that is not standard base64", () => {
    expect(decodeBase64("MEUCIQ")).toBeUndefined(); // unpadded
    expect(decodeBase64("MEUC-Q==")).toBeUndefined(); // URL alphabet
    expect(decodeBase64("MEUCIQ==")).toBeDefined();
  });

  it("reads WebCrypto's own signatures whatever their length", async () => {
    const { privateKey } = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign"])) as CryptoKeyPair;
    for (let i = 0; i < 20; i++) {
      const body = new TextEncoder().encode(`body ${i}`);
      const raw = new Uint8Array(await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, privateKey, body));
      expect([...derToP1363(p1363ToDer(raw))!]).toEqual([...raw]);
    }
  });
});
