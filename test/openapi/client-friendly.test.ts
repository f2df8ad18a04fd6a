import { beforeAll, describe, expect, it } from "vitest";
import { fetchDocument, type Json, METHODS } from "../helpers/openapi.ts";

/**
 * The document generates clean clients in other languages (openapi-python-client, openapi-generator): what
 * they trip over is held here, over the document the worker serves.
 */

let doc: Json;
beforeAll(async () => {
  doc = await fetchDocument();
});

/**
 * Keywords that only validate (a currency's decimals as if/then/else, the fx base as not): generators build no types
 * from them, so what they hold is no shape a client has.
 */
const VALIDATION_ONLY = new Set(["not", "if", "then", "else"]);

/** Every schema object in the document that a generator builds types from, with its JSON pointer. */
function* schemas(value: unknown, pointer = "#"): Generator<{ schema: Json; pointer: string }> {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) yield* schemas(item, `${pointer}/${i}`);
    return;
  }
  if (value === null || typeof value !== "object") return;
  const object = value as Json;
  if ("type" in object || "anyOf" in object || "oneOf" in object || "enum" in object || "$ref" in object) yield { schema: object, pointer };
  for (const [key, child] of Object.entries(object)) if (!VALIDATION_ONLY.has(key)) yield* schemas(child, `${pointer}/${key}`);
}

const alternativesOf = (schema: Json): Json[] => [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])];
const component = (ref: string) => doc.components.schemas[ref.replace("#/components/schemas/", "")] as Json;

describe("the OpenAPI document, for generated clients", () => {
  it("has no inline object among the alternatives of an anyOf or oneOf: each is a $ref to a named component", () => {
    const inline = [...schemas(doc)]
      .filter(({ schema }) =>
        alternativesOf(schema).some((alt) => alt.$ref === undefined && (alt.type === "object" || "properties" in alt)),
      )
      .map(({ pointer }) => pointer);
    expect(inline).toEqual([]);
  });

  it("lists every event of GET /events, GET /account/events and the stream as a oneOf of components, discriminated by type", () => {
    for (const [name, types] of [
      ["FeedEvent", ["price.changed", "stock.changed"]],
      ["AccountFeedEvent", ["api_key.leaked", "api_key.expiring", "webhook.disabled", "usage.threshold"]],
    ] as const) {
      const union = component(`#/components/schemas/${name}`);
      expect(union.anyOf, name).toBeUndefined();
      expect(
        union.oneOf.every((alt: Json) => typeof alt.$ref === "string"),
        name,
      ).toBe(true);
      expect(union.discriminator.propertyName, name).toBe("type");
      expect(Object.keys(union.discriminator.mapping).sort(), name).toEqual([...types].sort());
      // Each mapping names the component whose `type` is that value, and every alternative is mapped.
      for (const [type, ref] of Object.entries(union.discriminator.mapping as Record<string, string>)) {
        expect(component(ref).properties.type.enum, `${name} ${type}`).toEqual([type]);
        expect(component(ref).required, `${name} ${type}`).toEqual(expect.arrayContaining(["id", "type", "timestamp", "data"]));
        expect(component(ref).properties.data.$ref, `${name} ${type}: its data is a named component`).toMatch(/^#\/components\/schemas\//);
      }
      expect(union.oneOf.map((alt: Json) => alt.$ref).sort(), name).toEqual(Object.values(union.discriminator.mapping).sort());
    }
    const feeds = { "/events": "EventFeed", "/account/events": "AccountEventFeed" } as const;
    for (const [path, feed] of Object.entries(feeds)) {
      const body = doc.paths[path].get.responses["200"].content["application/json"].schema;
      expect(body.$ref, path).toBe(`#/components/schemas/${feed}`);
    }
    // Every union of events in the document (webhook payloads included) carries a discriminator.
    for (const { schema, pointer } of schemas(doc)) {
      const alternatives = alternativesOf(schema).filter((alt) => alt.$ref !== undefined);
      const events = alternatives.filter((alt) => component(alt.$ref).properties?.type?.enum?.length === 1);
      if (events.length > 1) expect(schema.discriminator?.propertyName, pointer).toBe("type");
    }
  });

  it("makes a nullable enum one named enum or null, never an enum copied with null added", () => {
    const offenders: string[] = [];
    for (const { schema, pointer } of schemas(doc)) {
      if (Array.isArray(schema.enum) && (schema.enum.includes(null) || (Array.isArray(schema.type) && schema.type.includes("null"))))
        offenders.push(`${pointer}: enum with null`);
      const alternatives = alternativesOf(schema).map((alt) => JSON.stringify(alt));
      if (new Set(alternatives).size !== alternatives.length) offenders.push(`${pointer}: duplicate alternatives`);
      if (alternativesOf(schema).some((alt) => alt.enum !== undefined)) offenders.push(`${pointer}: an inline enum among alternatives`);
    }
    expect(offenders).toEqual([]);
    for (const [name, owner, field] of [
      ["PriceDirection", "PriceChangedData", "direction"],
      ["RevokedReason", "ApiKey", "revoked_reason"],
    ] as const) {
      expect(doc.components.schemas[owner].properties[field].anyOf, `${owner}.${field}`).toEqual([
        { $ref: `#/components/schemas/${name}` },
        { type: "null" },
      ]);
      expect(doc.components.schemas[name].type, name).toBe("string");
    }
  });

  it("types every query parameter: a whole number as an integer with its bounds, never a bare string (a flag is an enum)", () => {
    const bounds: Record<string, [number, number]> = { limit: [1, 1000], new_low_days: [1, 365], new_high_days: [1, 365] };
    const found = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const method of METHODS) {
        for (const parameter of item[method]?.parameters ?? []) {
          if (parameter.in !== "query") continue;
          const where = `${method.toUpperCase()} ${path} ${parameter.name}`;
          expect(String(parameter.schema.pattern), `${where}: a number is not a string with a pattern`).not.toMatch(/^\^0\*/);
          if (parameter.schema.type === "integer")
            expect(parameter.schema, where).toMatchObject({ minimum: expect.any(Number), maximum: expect.any(Number) });
          // A bare string would let a generator (and a fuzzer) send `?flag=`: a query value always says what it takes.
          const says = ["enum", "pattern", "minLength", "format", "anyOf", "$ref", "const"].some((keyword) => keyword in parameter.schema);
          expect(parameter.schema.type !== "string" || says, `${where}: a bare string`).toBe(true);
          const range = bounds[parameter.name];
          if (!range) continue;
          found.add(parameter.name);
          expect(parameter.schema, where).toMatchObject({ type: "integer", minimum: range[0], maximum: range[1] });
        }
      }
    }
    expect([...found].sort()).toEqual(Object.keys(bounds).sort());
  });

  it("states the rules a validator applies across fields: currency with the money rules", () => {
    expect(doc.components.schemas.AlertFilters.dependentRequired).toEqual({
      min_change_abs: ["currency"],
      price_below: ["currency"],
      price_above: ["currency"],
    });
    const usage = doc.paths["/account/usage"].get.parameters.find((p: Json) => p.name === "from");
    expect(usage.description).toContain("before to");
    const history = doc.paths["/products/{id}/history"].get.parameters.find((p: Json) => p.name === "to");
    expect(history.description).toContain("later than from");
    const replay = doc.paths["/webhooks/{id}/replay"].post.requestBody.content["application/json"].schema;
    expect(replay.properties.until.description).toContain("later than since");
  });
});
