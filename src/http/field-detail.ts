/**
 * A 400's detail that names a field: "Invalid body: allowed_ips.0: must be …". The API writes it
 * (src/http/validation.ts); the dashboard reads it back to name the field as its form labels it, so the
 * two cannot drift. No zod here: the dashboard's browser bundle imports this file.
 */

/** "Invalid <what>: <field>: <message>", or without a field when the whole input is wrong. */
export const fieldDetail = (what: string, field: string, message: string) => `Invalid ${what}: ${field ? `${field}: ` : ""}${message}`;

/** A field path is dot-separated names and list indexes ("filters.brands.2"): no spaces, unlike a message. */
const FIELD_DETAIL = /^Invalid [a-z ]+: ([\w-]+(?:\.[\w-]+)*): ([\s\S]+)$/;

/** The field path (its segments, indexes as numbers) and message of a detail `fieldDetail` wrote; undefined for any other. */
export function readFieldDetail(detail: string): { path: Array<string | number>; message: string } | undefined {
  const [, field, message] = FIELD_DETAIL.exec(detail) ?? [];
  if (!field || !message) return undefined;
  return { path: field.split(".").map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment)), message };
}
