import fc from "fast-check";
import { DAY_MS } from "../../src/platform/time.ts";

/**
 * fast-check arbitraries from JSON Schema, for the keywords GET /openapi.json uses in its request
 * schemas: $ref, const, enum, anyOf/oneOf, type (and type lists with "null"), pattern,
 * format date/date-time/uri, min/maxLength, minimum/maximum/multipleOf, properties/required/minProperties/
 * dependentRequired/additionalProperties, items/minItems/maxItems. And `mutations`: one-change variants of a valid
 * value that the same schema refuses, each with the field it breaks.
 *
 * Where a description narrows what JSON Schema says, the generator follows the description:
 * date-times are in the past ("at most 5 minutes ahead") unless the field is "in the future", then
 * they span a day ago to two years ahead (so both sides of "at most 1 year ahead" come up), and
 * URIs are https:// on a public name.
 */

export type Schema = Record<string, any>;
export type Resolve = (schema: Schema) => Schema;

/** Arrays are generated with at most this many items beyond minItems: requests stay small. */
const EXTRA_ITEMS = 2;
const EARLIEST = new Date("2000-01-01T00:00:00Z");
/** Any Unicode code point (astral ones too: JSON Schema lengths count code points). */
const text = (constraints: { minLength?: number; maxLength?: number } = {}) => fc.string({ unit: "binary", ...constraints });

const dateTime = (future: boolean) => {
  const now = Date.now();
  const [min, max] = future ? [now - DAY_MS, now + 2 * 365 * DAY_MS] : [EARLIEST.getTime(), now];
  return fc.date({ min: new Date(min), max: new Date(max), noInvalidDate: true }).map((d) => d.toISOString());
};
const httpsUrl = () => fc.webUrl({ validSchemes: ["https"], withQueryParameters: true }).filter((url) => url.length <= 200);

function stringArbitrary(schema: Schema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0;
  const maxLength = schema.maxLength ?? minLength + 40;
  const fits = (s: string) => [...s].length >= minLength && [...s].length <= maxLength;
  const future = /in the future/.test(schema.description ?? "");
  if (schema.format === "date-time") return dateTime(future);
  if (schema.format === "date") return dateTime(future).map((s) => s.slice(0, 10));
  if (schema.format === "uri") return httpsUrl().filter(fits);
  if (schema.pattern) {
    // An unanchored pattern only has to occur somewhere: pad it with free text.
    const pattern = new RegExp(schema.pattern, "u");
    const anchored = schema.pattern.startsWith("^") && schema.pattern.endsWith("$");
    const matching = fc.stringMatching(pattern, { size: "small" });
    const padded = anchored ? matching : fc.tuple(text({ maxLength: 5 }), matching, text({ maxLength: 5 })).map((parts) => parts.join(""));
    return padded.filter(fits);
  }
  return text({ minLength, maxLength: Math.min(maxLength, minLength + 40) });
}

function numberArbitrary(schema: Schema, integer: boolean): fc.Arbitrary<number> {
  const min = schema.minimum ?? -1e6;
  const max = schema.maximum ?? 1e6;
  const step = schema.multipleOf ?? (integer ? 1 : undefined);
  if (step === undefined) return fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
  const decimals = Math.max(0, -Math.floor(Math.log10(step)));
  return fc.integer({ min: Math.ceil(min / step), max: Math.floor(max / step) }).map((k) => Number((k * step).toFixed(decimals)));
}

function objectArbitrary(schema: Schema, resolve: Resolve): fc.Arbitrary<Record<string, unknown>> {
  const properties: Record<string, Schema> = schema.properties ?? {};
  const record = Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, arbitrary(property, resolve)]));
  const dependents = Object.entries<string[]>(schema.dependentRequired ?? {});
  // dependentRequired: a field whose dependencies were left out is left out too.
  const objects = (fc.record(record, { requiredKeys: (schema.required ?? []) as string[] }) as fc.Arbitrary<Record<string, unknown>>).map(
    (value) =>
      Object.fromEntries(
        Object.entries(value).filter(
          ([name]) => !dependents.some(([field, needs]) => field === name && needs.some((need) => !(need in value))),
        ),
      ),
  );
  const least: number = schema.minProperties ?? 0;
  return least > 0 ? objects.filter((value) => Object.keys(value).length >= least) : objects;
}

/** Values the schema accepts. */
export function arbitrary(schema: Schema, resolve: Resolve): fc.Arbitrary<unknown> {
  schema = resolve(schema);
  if ("const" in schema) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...(schema.enum as unknown[]));
  const branches: Schema[] | undefined = schema.anyOf ?? schema.oneOf;
  if (branches) {
    const { anyOf: _anyOf, oneOf: _oneOf, ...rest } = schema;
    return fc.oneof(...branches.map((branch) => arbitrary({ ...rest, ...resolve(branch) }, resolve)));
  }
  if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((type: string) => arbitrary({ ...schema, type }, resolve)));
  switch (schema.type) {
    case "null":
      return fc.constant(null);
    case "boolean":
      return fc.boolean();
    case "string":
      return stringArbitrary(schema);
    case "integer":
    case "number":
      return numberArbitrary(schema, schema.type === "integer");
    case "array": {
      const minLength = schema.minItems ?? 0;
      const maxLength = Math.min(schema.maxItems ?? Infinity, minLength + EXTRA_ITEMS);
      return fc.array(arbitrary(schema.items ?? {}, resolve), { minLength, maxLength });
    }
    case "object":
      return objectArbitrary(schema, resolve);
    default:
      throw new Error(`no arbitrary for schema ${JSON.stringify(schema)}`);
  }
}

export interface Mutation {
  /** Where the change is, as keys from the value's root. */
  path: (string | number)[];
  /** The name a 400's detail must mention: the field's dotted path, or the unknown field's name. */
  named: string;
  /** The whole value after the change. */
  value: unknown;
  what: string;
}

const typesOf = (schema: Schema): string[] => (Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []);

/** A value of none of `types`. */
function wrongType(types: string[]): unknown {
  if (!types.includes("string")) return `not-a-${types[0] ?? "value"}`;
  if (!types.includes("number") && !types.includes("integer")) return 12345;
  return true;
}

/** Changes to a string the schema (as resolved) must refuse; the caller keeps those the validator agrees on. */
function stringBreaks(schema: Schema): [string, unknown][] {
  const breaks: [string, unknown][] = [];
  if (schema.maxLength !== undefined) breaks.push(["too long", "x".repeat(schema.maxLength + 1)]);
  if (schema.minLength) breaks.push(["too short", ""]);
  if (schema.pattern || schema.format || schema.anyOf || schema.enum)
    breaks.push(["pattern/format/enum break", "!?"], ["blank", " "], ["control character", "a\u0001b"]);
  // RFC 3986 is ASCII only: an internationalised host must arrive punycoded (the fuzzer's https://Ï).
  if (schema.format === "uri")
    breaks.push(["non-ASCII (RFC 3986)", "https://\u00cf.example/"], ["non-ASCII (RFC 3986)", "https://example.com/caf\u00e9"]);
  return breaks;
}

function numberBreaks(schema: Schema): [string, unknown][] {
  const breaks: [string, unknown][] = [];
  if (schema.maximum !== undefined) breaks.push(["above maximum", schema.maximum + 1]);
  if (schema.minimum !== undefined) breaks.push(["below minimum", schema.minimum - 1]);
  if (schema.multipleOf !== undefined) breaks.push(["not a multiple", (schema.minimum ?? 0) + schema.multipleOf / 3]);
  return breaks;
}

const setAt = (root: unknown, path: (string | number)[], replace: (old: any) => unknown): unknown => {
  if (!path.length) return replace(root);
  const [head, ...rest] = path;
  const copy: any = Array.isArray(root) ? [...root] : { ...(root as object) };
  copy[head!] = setAt(copy[head!], rest, replace);
  return copy;
};

/**
 * One-change variants of `value` (valid per `schema`): a wrong type, a value out of range, a string
 * breaking its length/pattern/format/enum, an unknown field, a missing required field (or one another field requires). `strings`
 * only: query and path values, which are text on the wire.
 */
export function mutations(schema: Schema, value: unknown, resolve: Resolve, { strings = false } = {}): Mutation[] {
  const found: Mutation[] = [];
  const visit = (node: Schema, at: unknown, path: (string | number)[]) => {
    node = resolve(node);
    const named = path.join(".");
    const add = (what: string, replacement: unknown) => found.push({ path, named, value: setAt(value, path, () => replacement), what });
    if (path.length && !strings) add("wrong type", wrongType(typesOf(node)));
    if (typeof at === "string") for (const [what, replacement] of stringBreaks(node)) add(what, replacement);
    if (typeof at === "number") for (const [what, replacement] of numberBreaks(node)) add(what, replacement);
    if (Array.isArray(at) && node.items) for (const [i, item] of at.entries()) visit(node.items, item, [...path, i]);
    if (Array.isArray(at) && node.maxItems !== undefined && node.maxItems < 50 && at.length)
      add("too many items", Array(node.maxItems + 1).fill(at[0]));
    if (at && typeof at === "object" && !Array.isArray(at) && node.properties) {
      if (node.additionalProperties === false) {
        found.push({
          path,
          named: "unexpected_field",
          value: setAt(value, path, (old) => ({ ...old, unexpected_field: 1 })),
          what: "unknown field",
        });
      }
      for (const name of node.required ?? []) {
        found.push({
          path: [...path, name],
          named: [...path, name].join("."),
          value: setAt(value, path, ({ [name]: _dropped, ...rest }) => rest),
          what: "missing required field",
        });
      }
      for (const [field, needs] of Object.entries<string[]>(node.dependentRequired ?? {})) {
        if (!(field in at)) continue;
        for (const name of needs) {
          found.push({
            path: [...path, name],
            named: [...path, name].join("."),
            value: setAt(value, path, ({ [name]: _dropped, ...rest }) => rest),
            what: `missing field required with ${field}`,
          });
        }
      }
      for (const [name, property] of Object.entries<Schema>(node.properties))
        if (name in at) visit(property, (at as any)[name], [...path, name]);
    }
  };
  visit(schema, value, []);
  return found;
}
