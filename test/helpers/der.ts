/** ECDSA signatures between WebCrypto's raw r‖s (IEEE P1363) and the DER form GitHub sends: pure, for Node and workerd alike. */

/** One DER INTEGER of an unsigned big-endian value: no leading zero bytes, one 0x00 when the top bit is set. */
function derInteger(value: Uint8Array): number[] {
  let start = 0;
  while (start < value.length - 1 && value[start] === 0) start++;
  const bytes = [...value.subarray(start)];
  if (bytes[0]! & 0x80) bytes.unshift(0);
  return [0x02, bytes.length, ...bytes];
}

/** WebCrypto's r‖s as DER `SEQUENCE { r, s }`. */
export function p1363ToDer(raw: Uint8Array): Uint8Array {
  const body = [...derInteger(raw.subarray(0, 32)), ...derInteger(raw.subarray(32))];
  return new Uint8Array([0x30, body.length, ...body]);
}

export const base64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
