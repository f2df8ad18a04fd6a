import { describe, expect, it } from "vitest";
import { freshAccount } from "../helpers/accounts.ts";
import { mcpClient } from "../helpers/mcp.ts";

/**
 * Every tool's inputSchema and outputSchema as hosts that take one type per schema read them, by the MCP inspector's
 * schema-portability rules (its `--cli --method tools/list --strict`): no `type` written as an array, every nullable
 * value an `anyOf` with `{"type":"null"}` beside the value's own schema, no bare `true`/`false` where a schema goes, no
 * `$ref` outside the schema, and no schema that constrains nothing (it accepts any value). Also the server's
 * `instructions`.
 */

type Schema = Record<string, unknown>;

/** Keywords whose value is a map of names to schemas, a list of schemas, or one schema (a list, for old `items`). */
const SCHEMA_MAPS = ["properties", "patternProperties", "dependentSchemas", "$defs", "definitions"];
const SCHEMA_LISTS = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SCHEMA_ONES = [
  "items",
  "contains",
  "not",
  "propertyNames",
  "if",
  "then",
  "else",
  "additionalProperties",
  "unevaluatedProperties",
  "additionalItems",
  "unevaluatedItems",
  "contentSchema",
];
/** Where `true` or `false` is a schema as the inspector allows it (`additionalProperties: false`). */
const BOOLEAN_SCHEMA_KEYWORDS = new Set(["additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"]);
/** The keywords that constrain a value: a schema with none of them accepts anything. */
const CONSTRAINING = new Set([
  "type",
  "enum",
  "const",
  "multipleOf",
  "maximum",
  "exclusiveMaximum",
  "minimum",
  "exclusiveMinimum",
  "maxLength",
  "minLength",
  "pattern",
  "format",
  "contentMediaType",
  "contentEncoding",
  "contentSchema",
  "maxItems",
  "minItems",
  "uniqueItems",
  "maxContains",
  "minContains",
  "maxProperties",
  "minProperties",
  "required",
  "dependentRequired",
  "allOf",
  "anyOf",
  "oneOf",
  "not",
  "items",
  "prefixItems",
  "contains",
  "additionalItems",
  "unevaluatedItems",
  "properties",
  "patternProperties",
  "additionalProperties",
  "unevaluatedProperties",
  "propertyNames",
  "dependentSchemas",
  "dependencies",
  "$ref",
  "$dynamicRef",
  "$recursiveRef",
]);

/** Every schema in `schema` (itself included) with its JSON path and the keyword it sits under. */
function* schemas(schema: unknown, path: string, keyword?: string): Generator<[string, Schema | boolean, string | undefined]> {
  if (typeof schema === "boolean") {
    yield [path, schema, keyword];
    return;
  }
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) return;
  const node = schema as Schema;
  yield [path, node, keyword];
  for (const key of SCHEMA_MAPS)
    for (const [name, sub] of Object.entries((node[key] as Schema | undefined) ?? {})) yield* schemas(sub, `${path}.${key}.${name}`, key);
  for (const key of SCHEMA_LISTS)
    for (const [i, sub] of ((node[key] as unknown[] | undefined) ?? []).entries()) yield* schemas(sub, `${path}.${key}[${i}]`, key);
  for (const key of SCHEMA_ONES) {
    const sub = node[key];
    if (Array.isArray(sub)) for (const [i, item] of sub.entries()) yield* schemas(item, `${path}.${key}[${i}]`, key);
    else if (sub !== undefined) yield* schemas(sub, `${path}.${key}`, key);
  }
}

/** What the inspector would flag, and a `null` allowed in any other way than anyOf's own `{"type":"null"}`. */
function portabilityProblems(schema: unknown, at: string): string[] {
  const problems: string[] = [];
  for (const [path, node, keyword] of schemas(schema, at)) {
    if (typeof node === "boolean") {
      if (!keyword || !BOOLEAN_SCHEMA_KEYWORDS.has(keyword)) problems.push(`${path}: a bare ${node} where a schema goes`);
      continue;
    }
    if (Array.isArray(node.type)) problems.push(`${path}: type is an array ${JSON.stringify(node.type)}`);
    if (typeof node.$ref === "string" && !node.$ref.startsWith("#")) problems.push(`${path}: $ref outside the schema (${node.$ref})`);
    if (
      keyword !== "not" &&
      !Object.keys(node).some((key) => CONSTRAINING.has(key)) &&
      !("if" in node && ("then" in node || "else" in node))
    )
      problems.push(`${path}: constrains nothing (accepts any value)`);
    if (node.nullable !== undefined) problems.push(`${path}: uses nullable (OpenAPI 3.0), not anyOf with null`);
    for (const key of ["oneOf", "anyOf"] as const) {
      const branches = node[key];
      if (!Array.isArray(branches)) continue;
      const nulls = branches.filter((branch: Schema) => branch.type === "null");
      if (nulls.some((branch: Schema) => Object.keys(branch).length !== 1))
        problems.push(`${path}.${key}: its null branch must be exactly {"type":"null"}`);
      if (key === "oneOf" && nulls.length > 0) problems.push(`${path}: a nullable value as oneOf, not anyOf`);
    }
    if (Array.isArray(node.enum) && node.enum.includes(null)) problems.push(`${path}: null inside an enum, not an anyOf branch`);
  }
  return problems;
}

describe("MCP tools' schemas, portable", () => {
  it("the walk finds what it must refuse (it can fail)", () => {
    expect(portabilityProblems({ type: "object", properties: { a: { type: ["string", "null"] } } }, "x")).toEqual([
      'x.properties.a: type is an array ["string","null"]',
    ]);
    expect(portabilityProblems({ anyOf: [{ type: "string" }, { type: "null" }] }, "x")).toEqual([]);
    expect(portabilityProblems({ type: "object", properties: { a: {}, b: true }, additionalProperties: false }, "x")).toEqual([
      "x.properties.a: constrains nothing (accepts any value)",
      "x.properties.b: a bare true where a schema goes",
    ]);
    expect(portabilityProblems({ $ref: "https://example.com/s.json" }, "x")).toEqual([
      "x: $ref outside the schema (https://example.com/s.json)",
    ]);
  });

  it("has no type array and writes every nullable as anyOf with null, in every tool's input and output", async () => {
    const client = await mcpClient((await freshAccount({ plan: "premium" })).key);
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThanOrEqual(5);
    const problems = tools.flatMap((tool) => [
      ...portabilityProblems(tool.inputSchema, `${tool.name}.inputSchema`),
      ...portabilityProblems(tool.outputSchema, `${tool.name}.outputSchema`),
    ]);
    expect(problems).toEqual([]);
    // The nullables are still there, as anyOf: get_product's brand is a string or null.
    const brand = (tools.find((tool) => tool.name === "get_product")!.outputSchema!.properties as Record<string, Schema>).brand;
    expect(brand).toEqual(expect.objectContaining({ anyOf: expect.arrayContaining([{ type: "null" }]) }));
    await client.close();
  });

  it("gives instructions: what the tools are for, ids and SKUs, currencies, word-based search", async () => {
    const client = await mcpClient((await freshAccount({ plan: "premium" })).key);
    const instructions = client.getInstructions() ?? "";
    for (const words of ["search_products", "get_product", "sku", "currency", "GET /fx-rates", "word"])
      expect(instructions.toLowerCase(), words).toContain(words.toLowerCase());
    await client.close();
  });
});
