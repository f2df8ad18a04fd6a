import { constants, crc32, deflateRawSync } from "node:zlib";

/**
 * The pieces of ONE gzip member (RFC 1952) put together from stored parts, so a response needs no
 * compression work and every client reads it whole (docs/catalogue.md). A part is raw deflate data
 * (RFC 1951) ending in a sync flush: it ends on a byte boundary, has no final block and refers to
 * nothing before its own start, so parts concatenate in any order into one deflate stream. The
 * stream then needs an empty final block, and the member a trailer with the CRC-32 and length of the
 * whole uncompressed body, which `concatenated` combines from the parts' own without reading them.
 */

/** What a gzip trailer needs of a piece of the body: the CRC-32 and the length (bytes) of its uncompressed data. */
export interface Checked {
  crc: number;
  length: number;
}

export interface Deflated extends Checked {
  bytes: Uint8Array;
}

const encoder = new TextEncoder();

/** `text` as a part: compressed, ended by a sync flush instead of a final block. */
export function deflatePart(text: string): Deflated {
  const data = encoder.encode(text);
  return { bytes: deflateRawSync(data, { finishFlush: constants.Z_SYNC_FLUSH }), crc: crc32(data), length: data.length };
}

/**
 * `text` (at most 65,535 bytes) as a part without compression: one stored block, not final. Its
 * header's three bits (BFINAL 0, BTYPE 00) are padded to a byte, then LEN and its ones' complement,
 * little-endian, then the bytes as they are.
 */
export function storedPart(text: string): Deflated {
  const data = encoder.encode(text);
  const bytes = new Uint8Array(5 + data.length);
  const view = new DataView(bytes.buffer);
  view.setUint16(1, data.length, true);
  view.setUint16(3, ~data.length & 0xffff, true);
  bytes.set(data, 5);
  return { bytes, crc: crc32(data), length: data.length };
}

/** The member's header: magic, CM 8 (deflate), no flags, no modification time, XFL 0, OS 255 (unknown). */
export const GZIP_HEADER = Uint8Array.of(0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff);

/** The deflate stream's end: a final block with fixed codes holding only end-of-block (bits 1, 01, 0000000). */
export const FINAL_BLOCK = Uint8Array.of(0x03, 0x00);

/** The member's trailer: CRC-32 and length modulo 2^32 of the uncompressed body, little-endian. */
export function gzipTrailer(body: Checked): Uint8Array {
  const bytes = new Uint8Array(8);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, body.crc, true);
  view.setUint32(4, body.length % 2 ** 32, true);
  return bytes;
}

/** The CRC-32 and length of the parts' data one after another. */
export function concatenated(parts: Iterable<Checked>): Checked {
  let body: Checked = { crc: 0, length: 0 };
  for (const part of parts) body = { crc: crc32Combine(body.crc, part.crc, part.length), length: body.length + part.length };
  return body;
}

/*
 * CRC-32 combination, as zlib's crc32_combine does it. A CRC-32 is the message's polynomial over
 * GF(2) times x^32, reduced modulo the generator P (with the register's pre- and post-inversion).
 * That is linear, so crc(A then B) = crc(A) * x^(8 * length of B) mod P, XOR crc(B): appending B
 * multiplies A's remainder by x once per bit of B, and the inversions cancel out. Polynomials are
 * 32-bit words in reflected order, as zlib keeps them: bit 31 is the coefficient of x^0, bit 0 of x^31.
 */

/** The generator P (x^32 + x^26 + … + 1), reflected, without its x^32 term. */
const POLYNOMIAL = 0xedb88320;
const X_POWER_0 = 0x80000000;

/** a(x) * b(x) mod P: b times each of a's terms, b multiplied by x (and reduced) from one term to the next. */
function multiplyModP(a: number, b: number): number {
  let product = 0;
  for (let term = X_POWER_0; term !== 0; term >>>= 1) {
    if (a & term) product ^= b;
    b = b & 1 ? (b >>> 1) ^ POLYNOMIAL : b >>> 1;
  }
  return product >>> 0;
}

/**
 * x^(2^k) mod P for k = 0…31, each the square of the one before. 32 are enough: x's order modulo P
 * divides 2^32 - 1, so x^(2^(k+32)) = x^(2^k).
 */
const X_POWER_2_TO_THE: number[] = [X_POWER_0 >>> 1];
for (let k = 1; k < 32; k++) X_POWER_2_TO_THE.push(multiplyModP(X_POWER_2_TO_THE[k - 1]!, X_POWER_2_TO_THE[k - 1]!));

/** x^(8 * bytes) mod P, by square-and-multiply over the bits of `bytes` (starting at 2^3, a byte's 8 bits). */
function xPowerOfBytes(bytes: number): number {
  let power = X_POWER_0;
  for (let k = 3; bytes > 0; bytes = Math.floor(bytes / 2), k++)
    if (bytes % 2 === 1) power = multiplyModP(X_POWER_2_TO_THE[k % 32]!, power);
  return power;
}

/** The CRC-32 of A then B, from crc(A), crc(B) and B's length in bytes. */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return (multiplyModP(xPowerOfBytes(lengthB), crcA) ^ crcB) >>> 0;
}
